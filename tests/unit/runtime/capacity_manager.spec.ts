import { test } from '@japa/runner'
import {
  BootCancelledError,
  CapacityManager,
  type AdmitOptions,
  type BootQueueOrder,
  type CapacitySettings,
} from '#runtime/capacity/capacity_manager'

/** A manager whose "sleep" records who was put to sleep and frees them like a stop would. */
function manager(bootConcurrency: number, memoryBudgetMb: number, order?: BootQueueOrder) {
  const slept: string[] = []
  const capacity: CapacityManager = new CapacityManager({
    bootConcurrency,
    memoryBudgetMb,
    order,
    sleep: async (agentId) => {
      slept.push(agentId)
    },
  })
  return { capacity, slept }
}

/** A manager whose sleeps end when the test says (`underWay`): how many run at once shows. */
function heldSleeps(settings: Omit<CapacitySettings, 'sleep'>) {
  const underWay = new Map<string, () => void>()
  let mostAtOnce = 0
  const capacity = new CapacityManager({
    ...settings,
    sleep: (agentId) =>
      new Promise<void>((resolve) => {
        underWay.set(agentId, () => (underWay.delete(agentId), resolve()))
        mostAtOnce = Math.max(mostAtOnce, underWay.size)
      }),
  })
  return { capacity, underWay, mostAtOnce: () => mostAtOnce }
}

/** Admits each agent and ends its boot: running, idle, a candidate to sleep. */
async function running(capacity: CapacityManager, agentIds: string[], reservedMb: number) {
  for (const agentId of agentIds) {
    await capacity.admit(agentId, reservedMb)
    capacity.booted(agentId)
  }
}

/** True when the promise has settled within a few turns of the event loop. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false
  promise.then(
    () => (done = true),
    () => (done = true)
  )
  for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve))
  return done
}

test.group('Capacity manager', () => {
  test('boots at most bootConcurrency agents at once, in order', async ({ assert }) => {
    const { capacity } = manager(1, 10_000)
    await capacity.admit('a', 100)
    const second = capacity.admit('b', 100)
    const third = capacity.admit('c', 100)
    assert.isFalse(await settled(second), 'b waits for a boot slot')
    assert.isTrue(capacity.isQueued('b'))
    capacity.booted('a')
    assert.isTrue(await settled(second))
    assert.isFalse(await settled(third), 'c waits for b to boot')
    capacity.booted('b')
    assert.isTrue(await settled(third))
    assert.deepInclude(capacity.snapshot(), { booting: 1, running: 2, queued: 0, reservedMb: 300 })
  })

  test('a wake that resumes a checkpoint goes before waiting boots, after waiting wakes', async ({
    assert,
  }) => {
    const { capacity } = manager(1, 10_000)
    await capacity.admit('booting', 100)
    const admitted: string[] = []
    const starts = [
      ['cold-1', false],
      ['cold-2', false],
      ['wake-1', true],
      ['wake-2', true],
    ] as const
    const waiting = starts.map(([agentId, resumes]) =>
      capacity.admit(agentId, 100, { resumes }).then(() => admitted.push(agentId))
    )
    for (const agentId of ['booting', 'wake-1', 'wake-2', 'cold-1']) {
      capacity.booted(agentId)
      await settled(Promise.resolve())
    }
    await Promise.all(waiting)
    assert.deepEqual(admitted, ['wake-1', 'wake-2', 'cold-1', 'cold-2'])
  })

  test('a start that exceeds the budget puts the least recently active idle agent to sleep first', async ({
    assert,
  }) => {
    const { capacity, slept } = manager(4, 1000)
    await capacity.admit('old', 400)
    capacity.booted('old')
    await capacity.admit('recent', 400)
    capacity.booted('recent')
    capacity.touch('old')
    // 'old' is now the more recently active one: 'recent' goes.
    await capacity.admit('new', 400)
    assert.deepEqual(slept, ['recent'])
    assert.isTrue(capacity.isAdmitted('new'))
    assert.isFalse(capacity.isAdmitted('recent'))
    assert.isAtMost(capacity.snapshot().reservedMb, 1000, 'never over the budget')
  })

  test('starts waiting for room put up to roomSleeps agents to sleep at once (default one)', async ({
    assert,
  }) => {
    for (const [roomSleeps, most] of [
      [2, 2],
      [undefined, 1],
    ] as const) {
      const { capacity, underWay, mostAtOnce } = heldSleeps({
        bootConcurrency: 2,
        memoryBudgetMb: 900,
        roomSleeps,
      })
      await running(capacity, ['a', 'b', 'c'], 300)
      const waiting = [capacity.admit('x', 300), capacity.admit('y', 300)]
      while ((await settled(Promise.all(waiting))) === false) {
        for (const finish of [...underWay.values()]) finish()
      }
      assert.equal(mostAtOnce(), most, `roomSleeps ${roomSleeps}`)
      assert.isTrue(capacity.isAdmitted('x') && capacity.isAdmitted('y'))
      assert.isFalse(capacity.isAdmitted('a') || capacity.isAdmitted('b'), 'the two least recent')
      assert.isTrue(capacity.isAdmitted('c'), 'no third goes to sleep')
      assert.isAtMost(capacity.snapshot().reservedMb, 900)
    }
  })

  test('sleeps for room under way stay within roomSleeps when room frees meanwhile', async ({
    assert,
  }) => {
    const { capacity, underWay, mostAtOnce } = heldSleeps({
      bootConcurrency: 2,
      memoryBudgetMb: 1000,
      roomSleeps: 2,
    })
    await running(capacity, ['a', 'b', 'c', 'd', 'e'], 200)
    const waiting = ['x', 'y', 'z'].map((agentId) => capacity.admit(agentId, 200))
    await settled(Promise.resolve())
    assert.deepEqual([...underWay.keys()], ['a', 'b'], 'one sleep per free slot')
    // 'e' stops by itself: 'x' fits and takes a slot while 'a' and 'b' still go to sleep.
    capacity.release('e')
    await settled(Promise.resolve())
    assert.isTrue(capacity.isAdmitted('x'))
    assert.deepEqual([...underWay.keys()], ['a', 'b'], 'no third sleep')
    while ((await settled(Promise.all(waiting))) === false) {
      for (const finish of [...underWay.values()]) finish()
      for (const agentId of ['x', 'y', 'z'])
        if (capacity.isAdmitted(agentId)) capacity.booted(agentId)
    }
    assert.equal(mostAtOnce(), 2)
    assert.isAtMost(capacity.snapshot().reservedMb, 1000)
  })

  test('room is made while every boot slot is busy: the memory is ready when the slot frees', async ({
    assert,
  }) => {
    const { capacity, underWay } = heldSleeps({ bootConcurrency: 1, memoryBudgetMb: 900 })
    await running(capacity, ['a', 'b'], 300)
    await capacity.admit('booting', 300)
    const next = capacity.admit('next', 300)
    await settled(Promise.resolve())
    assert.deepEqual([...underWay.keys()], ['a'], 'the least recent goes to sleep at once')
    underWay.get('a')!()
    assert.isFalse(await settled(next), 'its memory is free, the slot is not yet')
    capacity.booted('booting')
    assert.isTrue(await settled(next))
    assert.deepEqual([...underWay.keys()], [], 'nobody else went to sleep')
    assert.isTrue(capacity.isAdmitted('b'))
  })

  test('a sleep for room whose processes ended (released) admits the start and lets the next sleep begin before it resolves', async ({
    assert,
  }) => {
    // The process driver releases a victim once its dump ended it; storing the checkpoint follows.
    const { capacity, underWay } = heldSleeps({ bootConcurrency: 2, memoryBudgetMb: 600 })
    await running(capacity, ['a', 'b'], 300)
    const x = capacity.admit('x', 300)
    const y = capacity.admit('y', 300)
    await settled(Promise.resolve())
    assert.deepEqual([...underWay.keys()], ['a'], 'one sleep at a time')
    capacity.release('a')
    assert.isTrue(await settled(x), "x goes on a's freed memory")
    assert.deepEqual([...underWay.keys()], ['a', 'b'], "b's sleep begins while a's is stored")
    // a wakes while its sleep is still under way: its new admission outlives that sleep.
    const a = capacity.admit('a', 300)
    capacity.release('b')
    assert.isTrue(await settled(y))
    capacity.release('x')
    assert.isTrue(await settled(a), "a goes on x's freed memory")
    underWay.get('a')!()
    await settled(Promise.resolve())
    assert.isTrue(capacity.isAdmitted('a'), 'its old sleep ending does not drop its new run')
  })

  test('when nothing can be put to sleep the start waits in the queue, and goes when memory frees', async ({
    assert,
  }) => {
    const { capacity, slept } = manager(4, 1000)
    await capacity.admit('booting', 800)
    const waiting = capacity.admit('next', 400)
    assert.isFalse(await settled(waiting), 'a booting agent is never put to sleep')
    assert.deepEqual(slept, [])
    assert.isTrue(capacity.isQueued('next'))
    capacity.release('booting')
    assert.isTrue(await settled(waiting))
    assert.isTrue(capacity.isAdmitted('next'))
  })

  test('an agent larger than the whole budget still runs, alone', async ({ assert }) => {
    const { capacity } = manager(2, 500)
    await capacity.admit('huge', 2048)
    assert.isTrue(capacity.isAdmitted('huge'))
  })

  test('a queued start is cancelled when the agent is stopped', async ({ assert }) => {
    const { capacity } = manager(1, 10_000)
    await capacity.admit('a', 100)
    const queued = capacity.admit('b', 100)
    capacity.release('b')
    await assert.rejects(() => queued, BootCancelledError)
    assert.isFalse(capacity.isQueued('b'))
  })

  test('a service shutdown cancels every queued start', async ({ assert }) => {
    const { capacity } = manager(1, 10_000)
    await capacity.admit('a', 100)
    const queued = [capacity.admit('b', 100), capacity.admit('c', 100)]
    capacity.cancelQueued()
    for (const start of queued) await assert.rejects(() => start, BootCancelledError)
    assert.equal(capacity.snapshot().queued, 0)
    assert.isTrue(capacity.isAdmitted('a'), 'what runs is stopped by the driver, not here')
  })
})

/**
 * Queues the starts behind one agent booting in the only slot, then frees
 * the slot after each admission: the order they were admitted in.
 */
async function admissionOrder(
  capacity: CapacityManager,
  starts: Array<[agentId: string, options: AdmitOptions]>,
  between: (admitted: string[]) => void = () => {}
): Promise<string[]> {
  await capacity.admit('blocker', 100)
  const admitted: string[] = []
  const waiting = starts.map(([agentId, options]) =>
    capacity.admit(agentId, 100, options).then(() => admitted.push(agentId))
  )
  let last = 'blocker'
  while (admitted.length < starts.length) {
    capacity.booted(last)
    await settled(Promise.resolve())
    last = admitted[admitted.length - 1]
    between(admitted)
  }
  await Promise.all(waiting)
  return admitted
}

test.group('Capacity manager: boot queue order', () => {
  test("accounts take turns: one account's burst does not hold another account's first agent back", async ({
    assert,
  }) => {
    const { capacity } = manager(1, 10_000)
    const admitted = await admissionOrder(capacity, [
      ['a1', { owner: 'A' }],
      ['a2', { owner: 'A' }],
      ['a3', { owner: 'A' }],
      ['a4', { owner: 'A' }],
      ['b1', { owner: 'B' }],
      ['c1', { owner: 'C' }],
      ['b2', { owner: 'B' }],
    ])
    // None served yet: fewer starts waiting first (C's one, B's two, A's four), then turns.
    assert.deepEqual(admitted, ['c1', 'b1', 'a1', 'b2', 'a2', 'a3', 'a4'])
  })

  test("a new account's first agent is not held back by burst accounts that have not had a turn yet", async ({
    assert,
  }) => {
    const { capacity } = manager(1, 10_000)
    await capacity.admit('blocker', 100)
    // Ten accounts of a burst, three starts each, all waiting.
    for (let round = 1; round <= 3; round++) {
      for (let account = 0; account < 10; account++) {
        void capacity.admit(`burst${account}-${round}`, 100, { owner: `burst${account}` })
      }
    }
    capacity.booted('blocker')
    await settled(Promise.resolve())
    assert.isTrue(capacity.isAdmitted('burst0-1'), 'the first account had its turn')
    // A new account arrives: nine burst accounts have not had a turn yet.
    void capacity.admit('newcomer', 100, { owner: 'newcomer' })
    assert.equal(capacity.queuePosition('newcomer'), 1)
    assert.deepEqual(capacity.queueOrder().slice(1, 3), ['burst1-1', 'burst2-1'])
  })

  test('the queue position is the place the pump admits from', async ({ assert }) => {
    const { capacity } = manager(1, 10_000)
    await capacity.admit('blocker', 100)
    for (const [agentId, owner] of [
      ['a1', 'A'],
      ['a2', 'A'],
      ['b1', 'B'],
      ['b2', 'B'],
    ]) {
      void capacity.admit(agentId, 100, { owner, priority: 'background' })
    }
    assert.deepEqual(capacity.queueOrder(), ['a1', 'b1', 'a2', 'b2'])
    assert.equal(capacity.queuePosition('b1'), 2)
    assert.equal(capacity.queuePosition('a2'), 3)
    assert.isNull(capacity.queuePosition('blocker'), 'an admitted agent has no place')
    assert.isNull(capacity.queuePosition('unknown'))
    capacity.booted('blocker')
    await settled(Promise.resolve())
    assert.deepEqual(capacity.queueOrder(), ['b1', 'a2', 'b2'])
    assert.equal(capacity.queuePosition('b1'), 1)
  })

  test('interactive starts go before background ones, whatever the account', async ({ assert }) => {
    const { capacity } = manager(1, 10_000)
    const admitted = await admissionOrder(capacity, [
      ['a1', { owner: 'A', priority: 'background' }],
      ['a2', { owner: 'A', priority: 'background' }],
      ['b1', { owner: 'B', priority: 'background' }],
      ['c1', { owner: 'C', priority: 'interactive' }],
      ['a3', { owner: 'A', priority: 'interactive' }],
    ])
    assert.deepEqual(admitted, ['c1', 'a3', 'b1', 'a1', 'a2'])
  })

  test('a message for a waiting background start upgrades it in place; one not yet queued is admitted interactive', async ({
    assert,
  }) => {
    const { capacity } = manager(1, 10_000)
    await capacity.admit('blocker', 100)
    for (const agentId of ['a1', 'a2', 'a3']) {
      void capacity.admit(agentId, 100, { owner: 'A', priority: 'background' })
    }
    capacity.prioritize('a3')
    // A message arrives before its start reaches the queue: it is queued interactive.
    capacity.prioritize('b1')
    void capacity.admit('b1', 100, { owner: 'B', priority: 'background' })
    // The owner starts it again while it waits: still one entry, already interactive.
    const again = capacity.admit('a3', 100, { owner: 'A', priority: 'interactive' })
    assert.equal(capacity.snapshot().queued, 4, 'upgraded, not queued twice')
    assert.equal(capacity.snapshot().queuedBackground, 2)
    assert.deepEqual(capacity.queueOrder(), ['a3', 'b1', 'a1', 'a2'])
    capacity.booted('blocker')
    assert.isTrue(await settled(again), 'both waiters of a3 are admitted together')
    assert.isTrue(capacity.isAdmitted('a3'))
  })

  test('the order read between changes follows each one: an arrival, an upgrade, a release, an admission', async ({
    assert,
  }) => {
    const { capacity } = manager(1, 10_000)
    await capacity.admit('blocker', 100)
    const wait = (agentId: string, owner: string) =>
      void capacity.admit(agentId, 100, { owner, priority: 'background' }).catch(() => undefined)
    wait('a1', 'A')
    wait('a2', 'A')
    assert.deepEqual(capacity.queueOrder(), ['a1', 'a2'])
    wait('b1', 'B')
    assert.deepEqual(capacity.queueOrder(), ['b1', 'a1', 'a2'], 'fewer waiting first')
    capacity.prioritize('a2')
    assert.deepEqual(capacity.queueOrder(), ['a2', 'b1', 'a1'])
    capacity.release('b1')
    assert.deepEqual(capacity.queueOrder(), ['a2', 'a1'])
    assert.equal(capacity.queuePosition('a1'), 2)
    capacity.booted('blocker')
    await new Promise((resolve) => setImmediate(resolve))
    assert.isTrue(capacity.isAdmitted('a2'))
    assert.deepEqual(capacity.queueOrder(), ['a1'])
    assert.equal(capacity.queuePosition('a1'), 1)
  })

  test('checkpoint resumes go before cold boots within their class, accounts taking turns', async ({
    assert,
  }) => {
    const { capacity } = manager(1, 10_000)
    const admitted = await admissionOrder(capacity, [
      ['a-cold', { owner: 'A' }],
      ['a-wake-1', { owner: 'A', resumes: true }],
      ['a-wake-2', { owner: 'A', resumes: true }],
      ['b-wake-1', { owner: 'B', resumes: true }],
      ['b-wake-2', { owner: 'B', resumes: true }],
      ['c-pre-wake', { owner: 'C', resumes: true, priority: 'background' }],
      ['c-pre-cold', { owner: 'C', priority: 'background' }],
    ])
    assert.deepEqual(admitted, [
      'a-wake-1',
      'b-wake-1',
      'a-wake-2',
      'b-wake-2',
      'a-cold',
      'c-pre-wake',
      'c-pre-cold',
    ])
  })

  test('a background start never puts an agent to sleep for room; an interactive one does', async ({
    assert,
  }) => {
    const { capacity, slept } = manager(4, 1000)
    await capacity.admit('idle', 800)
    capacity.booted('idle')
    const background = capacity.admit('pre-boot', 400, { priority: 'background' })
    assert.isFalse(await settled(background), 'it waits for memory')
    assert.deepEqual(slept, [])
    assert.equal(capacity.queuePosition('pre-boot'), 1)
    capacity.prioritize('pre-boot')
    assert.isTrue(await settled(background), 'upgraded by a message: it makes room')
    assert.deepEqual(slept, ['idle'])
  })

  test('fifo (the bench baseline): arrival order, resumes first, background like any start', async ({
    assert,
  }) => {
    const { capacity } = manager(1, 10_000, 'fifo')
    const admitted = await admissionOrder(capacity, [
      ['a1', { owner: 'A', priority: 'background' }],
      ['a2', { owner: 'A', priority: 'background' }],
      ['b1', { owner: 'B', priority: 'interactive' }],
      ['c1', { owner: 'C', resumes: true }],
    ])
    assert.deepEqual(admitted, ['c1', 'a1', 'a2', 'b1'])
  })
})
