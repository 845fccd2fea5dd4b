import { test } from '@japa/runner'
import { BootCancelledError, CapacityManager } from '#runtime/capacity/capacity_manager'

/** A manager whose "sleep" records who was put to sleep and frees them like a stop would. */
function manager(bootConcurrency: number, memoryBudgetMb: number) {
  const slept: string[] = []
  const capacity: CapacityManager = new CapacityManager({
    bootConcurrency,
    memoryBudgetMb,
    sleep: async (agentId) => {
      slept.push(agentId)
    },
  })
  return { capacity, slept }
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
