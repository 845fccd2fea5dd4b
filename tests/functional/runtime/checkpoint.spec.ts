import { randomUUID } from 'node:crypto'
import { existsSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { Assert } from '@japa/assert'
import { test } from '@japa/runner'
import { agentPaths } from '#runtime/agent_paths'
import { agentNetworkUnavailable, netnsName } from '#runtime/process/agent_network/agent_networks'
import { compressesCheckpoints, criu } from '#runtime/process/checkpoint'
import { childPids } from '#runtime/process/proc_stats'
import { markedProcesses, readRecord } from '#runtime/process/process_record'
import { agentUid, bubblewrapWorks } from '#runtime/process/sandbox'
import { unshareSandboxAvailability } from '#runtime/process/unshare_sandbox'
import { fixtureSpec, processHarness, type RuntimeHarness } from '#tests/helpers/runtime'
import { WARM_UP_CONVERSATION } from '#runtime/warm_up'

/**
 * Sleep with a CRIU checkpoint and wake by restoring it (docs/runtime.md
 * "Sleep and wake"), on the fixture framework in the real sandbox. The
 * fixture's `__count__` lives only in its process's memory: a restored
 * agent goes on counting from where it slept, a booted one starts over.
 */
const canCheckpoint = process.getuid?.() === 0 && bubblewrapWorks() && criu().path !== undefined
const skipReason = 'needs root, bubblewrap and CRIU 4.2+ (scripts/install-criu.sh)'

async function count(harness: RuntimeHarness, agentId: string) {
  const reply = await harness.runtime.chat(agentId, {
    conversationId: 'count',
    messages: [{ role: 'user', content: '__count__' }],
  })
  const match = /^count (\d+) since (\d+) pid (\d+)$/.exec(reply.content)
  if (!match) throw new Error(`unexpected reply: ${reply.content}`)
  return { count: Number(match[1]), since: Number(match[2]), pid: Number(match[3]) }
}

async function startReady(harness: RuntimeHarness, agentId: string, config = {}) {
  await harness.runtime.ensureStarted(fixtureSpec(agentId, config))
  await harness.runtime.waitUntilReady(agentId, { timeoutMs: 20_000 })
}

function checkpointDir(harness: RuntimeHarness, agentId: string) {
  return join(agentPaths(harness.agentsDir, agentId).runtime, 'checkpoint')
}

/** The private warm-up turns the fixture answered (it logs each chat's conversation). */
function warmUpTurns(harness: RuntimeHarness, agentId: string) {
  return readFileSync(agentPaths(harness.agentsDir, agentId).logFile, 'utf8')
    .split('\n')
    .filter((line) => line.includes(`chat user=${WARM_UP_CONVERSATION} `))
}

/** Sleeps a fresh agent and wakes it: nothing runs meanwhile, no checkpoint is kept, it boots anew. */
async function assertSleepsWithoutCheckpoint(harness: RuntimeHarness, assert: Assert) {
  const agentId = randomUUID()
  await startReady(harness, agentId)
  const before = await count(harness, agentId)
  await harness.runtime.sleep(agentId)
  assert.isTrue(
    harness.events.some((event) => event.type === 'sleeping' && event.agentId === agentId)
  )
  assert.deepEqual(markedProcesses(agentId), [])
  assert.isFalse(existsSync(checkpointDir(harness, agentId)))
  await startReady(harness, agentId)
  const after = await count(harness, agentId)
  assert.equal(after.count, 1, 'a fresh boot')
  assert.notEqual(after.since, before.since)
}

test.group('Runtime / checkpointed sleep and wake (process driver, CRIU)', (group) => {
  let harness: RuntimeHarness
  group.each.setup(async () => {
    harness = await processHarness()
    return () => harness.cleanup()
  })

  test('a sleeping agent holds no process and wakes restored, with its memory', async ({
    assert,
  }) => {
    const agentId = randomUUID()
    await startReady(harness, agentId)
    await count(harness, agentId)
    const before = await count(harness, agentId)
    assert.equal(before.count, 2)

    await harness.runtime.sleep(agentId)
    assert.isTrue(
      harness.events.some((event) => event.type === 'sleeping' && event.agentId === agentId)
    )
    assert.deepEqual(markedProcesses(agentId), [], 'nothing of the agent runs while it sleeps')
    const meta = JSON.parse(
      readFileSync(join(checkpointDir(harness, agentId), 'checkpoint.json'), 'utf8')
    )
    assert.isAbove(meta.bytes, 1024 * 1024, 'its memory is on disk')
    const asleep = await harness.runtime.status(agentId)
    assert.equal(asleep.state, 'stopped')

    await startReady(harness, agentId)
    const after = await count(harness, agentId)
    assert.equal(after.count, 3, 'the count went on: the process memory came back')
    assert.equal(after.since, before.since, 'the same run, not a new boot')
    assert.equal(after.pid, before.pid, 'restored with its own pid')
    const log = readFileSync(agentPaths(harness.agentsDir, agentId).logFile, 'utf8')
    assert.include(log, 'restored fixture from its checkpoint')
    assert.isFalse(existsSync(checkpointDir(harness, agentId)), 'a checkpoint is restored once')

    // Still confined as it was booted: its own uid, no privileges, the seccomp filter.
    const status = readFileSync(`/proc/${after.pid}/status`, 'utf8')
    assert.match(status, new RegExp(`^Uid:\\s+${agentUid(agentId)}\\s`, 'm'))
    assert.match(status, /^NoNewPrivs:\s+1$/m)
    assert.match(status, /^Seccomp:\s+2$/m)
    if (!agentNetworkUnavailable()) {
      // In the agent's own network namespace, which the wake made again.
      const netns = statSync(`/run/netns/${netnsName(agentId)}`).ino
      assert.equal(readlinkSync(`/proc/${after.pid}/ns/net`), `net:[${netns}]`)
    }

    // Restored, it stops like any other run, leaving nothing behind.
    const record = await readRecord(agentPaths(harness.agentsDir, agentId).recordFile)
    assert.include(childPids(record!.pid), after.pid)
    const processGroup = readFileSync(`/proc/${after.pid}/stat`, 'utf8')
      .split(') ')[1]
      .split(' ')[2]
    assert.equal(
      Number(processGroup),
      record!.pid,
      "in its run's process group, which a stop signals"
    )
    await harness.runtime.stop(agentId)
    assert.deepEqual(markedProcesses(agentId), [])
    const log2 = readFileSync(agentPaths(harness.agentsDir, agentId).logFile, 'utf8')
    assert.include(log2, 'received SIGTERM', 'stopped gracefully')
  })
    .skip(!canCheckpoint, skipReason)
    .timeout(90_000)

  test('a second sleep checkpoints the restored agent again', async ({ assert }) => {
    const agentId = randomUUID()
    await startReady(harness, agentId)
    const first = await count(harness, agentId)
    await harness.runtime.sleep(agentId)
    await startReady(harness, agentId)
    await count(harness, agentId)
    await harness.runtime.sleep(agentId)
    assert.deepEqual(markedProcesses(agentId), [])
    await startReady(harness, agentId)
    const third = await count(harness, agentId)
    assert.equal(third.count, 3)
    assert.equal(third.since, first.since)
  })
    .skip(!canCheckpoint, skipReason)
    .timeout(90_000)

  test('a run that had no turn gets one private warm-up turn before its checkpoint; a restored run does not need another', async ({
    assert,
  }) => {
    const agentId = randomUUID()
    const logOf = (id: string) => readFileSync(agentPaths(harness.agentsDir, id).logFile, 'utf8')
    const warmUps = (id: string) => warmUpTurns(harness, id)
    await startReady(harness, agentId)
    await harness.runtime.sleep(agentId)
    assert.lengthOf(warmUps(agentId), 1)
    assert.isBelow(
      logOf(agentId).indexOf(`chat user=${WARM_UP_CONVERSATION} `),
      logOf(agentId).indexOf('asleep: checkpointed to disk'),
      'the turn came before the checkpoint'
    )

    await startReady(harness, agentId)
    await harness.runtime.sleep(agentId)
    assert.lengthOf(warmUps(agentId), 1, 'restored, the run is still warm')

    // A boot (here: its config changed while it slept) starts cold again.
    await startReady(harness, agentId, { personality: 'Changed while asleep' })
    await harness.runtime.sleep(agentId)
    assert.lengthOf(warmUps(agentId), 2)

    const chatted = randomUUID()
    await startReady(harness, chatted)
    await count(harness, chatted)
    await harness.runtime.sleep(chatted)
    assert.lengthOf(warmUps(chatted), 0, 'a run that had a turn needs no warm-up')
  })
    .skip(!canCheckpoint, skipReason)
    .timeout(90_000)

  test('a checkpoint of an older config is not restored: the agent boots afresh', async ({
    assert,
  }) => {
    const agentId = randomUUID()
    await startReady(harness, agentId)
    const before = await count(harness, agentId)
    await harness.runtime.sleep(agentId)
    assert.isTrue(existsSync(checkpointDir(harness, agentId)))

    await startReady(harness, agentId, { personality: 'Changed while asleep' })
    const after = await count(harness, agentId)
    assert.equal(after.count, 1, 'a fresh boot')
    assert.notEqual(after.since, before.since)
    assert.isFalse(existsSync(checkpointDir(harness, agentId)), 'the stale checkpoint is gone')
    const log = readFileSync(agentPaths(harness.agentsDir, agentId).logFile, 'utf8')
    assert.include(log, 'its checkpoint is of an older launch')
  })
    .skip(!canCheckpoint, skipReason)
    .timeout(90_000)

  test('a checkpoint that cannot be restored falls back to a boot', async ({ assert }) => {
    const agentId = randomUUID()
    await startReady(harness, agentId)
    const before = await count(harness, agentId)
    await harness.runtime.sleep(agentId)
    // Damaged on disk: its process tree's image is gone.
    rmSync(join(checkpointDir(harness, agentId), 'pstree.img'))
    await startReady(harness, agentId)
    const after = await count(harness, agentId)
    assert.equal(after.count, 1)
    assert.notEqual(after.since, before.since)
    const log = readFileSync(agentPaths(harness.agentsDir, agentId).logFile, 'utf8')
    assert.include(log, 'could not restore its checkpoint')
    assert.isFalse(
      harness.events.some((event) => event.type === 'exited' && event.agentId === agentId),
      'a failed restore is no crash'
    )
  })
    .skip(!canCheckpoint, skipReason)
    .timeout(90_000)
})

test.group('Runtime / checkpoints within their disk budget', (group) => {
  let harness: RuntimeHarness
  group.each.setup(async () => {
    // Room for one fixture checkpoint (about 3.5 MB compressed, 16 MB not), not two.
    harness = await processHarness({ checkpointDiskMb: compressesCheckpoints ? 5 : 24 })
    return () => harness.cleanup()
  })

  test('a newer checkpoint takes the room of the oldest: that agent wakes by booting', async ({
    assert,
  }) => {
    const older = randomUUID()
    const newer = randomUUID()
    await startReady(harness, older)
    await startReady(harness, newer)
    const olderBefore = await count(harness, older)
    const newerBefore = await count(harness, newer)

    await harness.runtime.sleep(older)
    assert.isTrue(existsSync(checkpointDir(harness, older)))
    await harness.runtime.sleep(newer)
    assert.isTrue(existsSync(checkpointDir(harness, newer)))
    assert.isFalse(existsSync(checkpointDir(harness, older)), 'made room for the newer one')

    await startReady(harness, older)
    await startReady(harness, newer)
    const olderAfter = await count(harness, older)
    const newerAfter = await count(harness, newer)
    assert.notEqual(olderAfter.since, olderBefore.since, 'booted')
    assert.equal(newerAfter.since, newerBefore.since, 'restored')
  })
    .skip(!canCheckpoint, skipReason)
    .timeout(90_000)
})

test.group('Runtime / checkpoints that do not fit', (group) => {
  let harness: RuntimeHarness
  group.each.setup(async () => {
    harness = await processHarness({ checkpointDiskMb: 1 })
    return () => harness.cleanup()
  })

  test('an agent whose checkpoint does not fit wakes by booting', async ({ assert }) => {
    await assertSleepsWithoutCheckpoint(harness, assert)
  })
    .skip(!canCheckpoint, skipReason)
    .timeout(60_000)
})

test.group('Runtime / sleep in the unshare sandbox (AGENT_SANDBOX=unshare)', (group) => {
  let harness: RuntimeHarness
  group.each.setup(async () => {
    harness = await processHarness({ sandbox: 'unshare' })
    return () => harness.cleanup()
  })

  test('checkpoints are off in it even where CRIU works: a sleep is a plain stop and a wake a boot', async ({
    assert,
  }) => {
    await assertSleepsWithoutCheckpoint(harness, assert)
  })
    .skip(
      !canCheckpoint || !unshareSandboxAvailability(true).works,
      `${skipReason}, and util-linux unshare`
    )
    .timeout(60_000)
})

test.group('Runtime / sleep without checkpoints', (group) => {
  let harness: RuntimeHarness
  group.each.setup(async () => {
    harness = await processHarness({ checkpoints: false })
    return () => harness.cleanup()
  })

  test('AGENT_CHECKPOINT=off: a sleep is a plain stop and a wake a boot', async ({ assert }) => {
    await assertSleepsWithoutCheckpoint(harness, assert)
  }).timeout(60_000)

  test('no checkpoint, no warm-up turn: the wake boots anyway', async ({ assert }) => {
    const agentId = randomUUID()
    await startReady(harness, agentId)
    await harness.runtime.sleep(agentId)
    assert.deepEqual(markedProcesses(agentId), [])
    assert.lengthOf(warmUpTurns(harness, agentId), 0)
  }).timeout(60_000)
})
