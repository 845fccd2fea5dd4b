import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { test } from '@japa/runner'
import { agentPaths } from '#runtime/agent_paths'
import { WARM_UP_CONVERSATION } from '#runtime/warm_up'
import { agentProcessIds } from '#tests/helpers/agent_processes'
import { fixtureSpec, processHarness, waitFor, type RuntimeHarness } from '#tests/helpers/runtime'

/** Niceness of every process of the agent (field 19 of /proc/<pid>/stat). */
function nicenessOf(agentId: string): number[] {
  return agentProcessIds(agentId).map((pid) => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])
  })
}

/**
 * The boot queue and memory budget with real agent processes (the fixture
 * framework reserves 256 MB): a budget of 300 MB holds one agent, one boot
 * slot boots one at a time.
 */
test.group('Capacity: boot queue and memory budget (process driver)', (group) => {
  let harness: RuntimeHarness
  group.each.setup(async () => {
    harness = await processHarness({}, { capacity: { bootConcurrency: 1, memoryBudgetMb: 300 } })
    return () => harness.cleanup()
  })

  test('a start that does not fit puts the least recently used idle agent to sleep first', async ({
    assert,
  }) => {
    const first = randomUUID()
    const second = randomUUID()
    await harness.runtime.ensureStarted(fixtureSpec(first), { waitReady: true })
    await harness.runtime.ensureStarted(fixtureSpec(second), { waitReady: true })

    assert.isFalse(await harness.runtime.isRunning(first), 'the idle agent was put to sleep')
    assert.isTrue(await harness.runtime.isRunning(second))
    assert.isTrue(
      harness.events.some((event) => event.type === 'sleeping' && event.agentId === first),
      'reported as sleeping, not stopped'
    )
    const capacity = harness.runtime.capacity()
    assert.isAtMost(capacity.reservedMb, capacity.memoryBudgetMb, 'never over the budget')
    // A start waited on that sleep: it took no warm-up turn, checkpoint or not.
    const log = readFileSync(agentPaths(harness.agentsDir, first).logFile, 'utf8')
    assert.notInclude(log, `chat user=${WARM_UP_CONVERSATION} `)
  }).timeout(60_000)

  test('a start waits in the queue (container: queued) while the only agent boots, then goes', async ({
    assert,
  }) => {
    const booting = randomUUID()
    const waiting = randomUUID()
    await harness.runtime.ensureStarted(fixtureSpec(booting))
    const queued = harness.runtime.ensureStarted(fixtureSpec(waiting))
    await waitFor(
      'the second start to queue',
      async () => (await harness.runtime.containerView(waiting)) === 'queued',
      5_000
    )
    assert.equal(harness.runtime.capacity().queued, 1)
    // Once the first is ready it is no longer booting, so it can be put to sleep for room.
    await queued
    await harness.runtime.waitUntilReady(waiting)
    assert.equal(await harness.runtime.containerView(waiting), 'running')
    assert.isFalse(await harness.runtime.isRunning(booting))
  }).timeout(60_000)

  test('agents run at a lower CPU priority than the service', async ({ assert }) => {
    const agentId = randomUUID()
    await harness.runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true })
    const values = nicenessOf(agentId)
    assert.isNotEmpty(values)
    for (const value of values) assert.equal(value, 10)
  }).timeout(60_000)

  test('a queued start is cancelled by a stop', async ({ assert }) => {
    const booting = randomUUID()
    const waiting = randomUUID()
    await harness.runtime.ensureStarted(fixtureSpec(booting))
    const queued = harness.runtime.ensureStarted(fixtureSpec(waiting))
    await waitFor(
      'the second start to queue',
      async () => (await harness.runtime.containerView(waiting)) === 'queued',
      5_000
    )
    harness.runtime.cancelQueuedStart(waiting)
    await assert.rejects(() => queued, /cancelled/)
    assert.notEqual(await harness.runtime.containerView(waiting), 'running')
  }).timeout(60_000)
})
