import { randomUUID } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { agentPaths } from '#runtime/agent_paths'
import { AgentCgroup, cgroupBases, cgroupsWritable } from '#runtime/process/cgroups'
import { readRecord } from '#runtime/process/process_record'
import { agentProcessIds } from '#tests/helpers/agent_processes'
import { fixtureSpec, processHarness, waitFor, type RuntimeHarness } from '#tests/helpers/runtime'

const SKIP = 'needs root and cgroup v1 memory, cpu and pids mounted writable'

/** `controller` -> group path, from /proc/<pid>/cgroup (v1 lines: id:controllers:path). */
function groupsOf(pid: number): Record<string, string> {
  const groups: Record<string, string> = {}
  for (const line of readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n')) {
    const [, controllers, path] = line.split(':')
    for (const controller of controllers?.split(',') ?? []) groups[controller] = path
  }
  return groups
}

const read = (dir: string, file: string) => readFileSync(join(dir, file), 'utf8').trim()

test.group(
  'Cgroups: each agent in its own memory, cpu and pids groups (process driver)',
  (group) => {
    let harness: RuntimeHarness
    group.each.setup(async () => {
      harness = await processHarness()
      return () => harness.cleanup()
    })

    test("an agent's processes run in its groups with its limits; stop removes them", async ({
      assert,
    }) => {
      const agentId = randomUUID()
      const spec = { ...fixtureSpec(agentId), resources: { memoryMb: 200, cpus: 0.5, pids: 48 } }
      await harness.runtime.ensureStarted(spec, { waitReady: true })

      const record = await readRecord(agentPaths(harness.agentsDir, agentId).recordFile)
      const pids = agentProcessIds(agentId)
      assert.include(pids, record!.pid)
      assert.isAbove(pids.length, 0)
      for (const pid of pids) {
        const groups = groupsOf(pid)
        for (const controller of ['memory', 'cpu', 'pids']) {
          assert.match(groups[controller], new RegExp(`/agent-host/${agentId}$`), `${controller}`)
        }
      }

      const { dirs } = new AgentCgroup(agentId, cgroupBases()!)
      assert.equal(read(dirs.memory, 'memory.limit_in_bytes'), String(200 * 1024 * 1024))
      if (existsSync(join(dirs.memory, 'memory.memsw.limit_in_bytes'))) {
        assert.equal(read(dirs.memory, 'memory.memsw.limit_in_bytes'), String(200 * 1024 * 1024))
      }
      assert.equal(read(dirs.cpu, 'cpu.shares'), '512')
      assert.equal(read(dirs.cpu, 'cpu.cfs_quota_us'), '50000')
      assert.equal(read(dirs.cpu, 'cpu.cfs_period_us'), '100000')
      assert.equal(read(dirs.pids, 'pids.max'), '48')
      // All agents together weigh half of one of the service's tasks under contention.
      assert.equal(read(join(dirs.cpu, '..'), 'cpu.shares'), '512')

      await harness.runtime.stop(agentId)
      for (const dir of Object.values(dirs)) assert.isFalse(existsSync(dir), `${dir} removed`)
    })
      .timeout(60_000)
      .skip(!cgroupsWritable(), SKIP)

    test('an agent allocating beyond its memory limit is killed by the kernel and restarted as a crash', async ({
      assert,
    }) => {
      const agentId = randomUUID()
      const spec = { ...fixtureSpec(agentId), resources: { memoryMb: 128 } }
      const first = await harness.runtime.ensureStarted(spec, { waitReady: true })

      // Well below the limit: answered.
      const small = await harness.runtime.chat(agentId, {
        conversationId: 'c',
        messages: [{ role: 'user', content: '__allocate__ 8' }],
      })
      assert.equal(small.content, 'allocated 8 MB')

      await assert.rejects(() =>
        harness.runtime.chat(agentId, {
          conversationId: 'c',
          messages: [{ role: 'user', content: '__allocate__ 400' }],
        })
      )
      const exited = await waitFor('the exit event', () =>
        harness.events.find((event) => event.type === 'exited' && event.agentId === agentId)
      )
      assert.include(
        exited.type === 'exited' ? exited.reason : '',
        'over its 128 MB memory limit, killed by the kernel'
      )
      const restarted = await waitFor(
        'a restart',
        async () => {
          const info = await harness.runtime.status(agentId)
          return info.state === 'running' && info.containerId !== first.containerId && info
        },
        20_000
      )
      assert.equal(restarted.restartCount, 1)
      await harness.runtime.waitUntilReady(agentId, { timeoutMs: 20_000 })
      const again = await harness.runtime.chat(agentId, {
        conversationId: 'c',
        messages: [{ role: 'user', content: 'still there?' }],
      })
      assert.equal(again.content, 'echo: still there?')
    })
      .timeout(90_000)
      .skip(!cgroupsWritable(), SKIP)

    test('the groups of an agent that crashed for good are removed', async ({ assert }) => {
      const agentId = randomUUID()
      await harness.runtime.ensureStarted(fixtureSpec(agentId, { crashOnStart: true }))
      const { dirs } = new AgentCgroup(agentId, cgroupBases()!)
      await waitFor(
        'the error state',
        async () => {
          const info = await harness.runtime.status(agentId)
          return info.state === 'error'
        },
        20_000
      )
      for (const dir of Object.values(dirs)) assert.isFalse(existsSync(dir), `${dir} removed`)
    })
      .timeout(60_000)
      .skip(!cgroupsWritable(), SKIP)
    test('a freeze stops every process of a running agent until the work is done; it goes on where it stood', async ({
      assert,
    }) => {
      const agentId = randomUUID()
      await harness.runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true })
      const count = (signal?: AbortSignal) =>
        harness.runtime.chat(agentId, {
          conversationId: 'c',
          messages: [{ role: 'user', content: '__count__' }],
          signal,
        })
      const first = await count()
      assert.match(first.content, /^count 1 /)
      const { dirs } = new AgentCgroup(agentId, cgroupBases()!)
      const pids = agentProcessIds(agentId)

      const frozen = await harness.runtime.whileFrozen(agentId, async () => {
        assert.equal(read(dirs.freezer!, 'freezer.state'), 'FROZEN')
        const members = read(dirs.freezer!, 'cgroup.procs').split('\n').map(Number)
        for (const pid of pids) assert.include(members, pid, `process ${pid} is in the freezer`)
        // Frozen: no answer, however long it is given.
        await assert.rejects(() => count(AbortSignal.timeout(700)))
        return 'copied'
      })
      assert.deepEqual(frozen, { value: 'copied' })
      assert.equal(read(dirs.freezer!, 'freezer.state'), 'THAWED')
      // The same process answers: the count is the one it held (the timed-out turn may have counted).
      const after = await count()
      assert.match(after.content, /^count [23] /)
      assert.deepEqual(agentProcessIds(agentId).sort(), pids.sort())

      // A stopped agent cannot be frozen: the work does not run.
      await harness.runtime.stop(agentId)
      let ran = false
      assert.isUndefined(await harness.runtime.whileFrozen(agentId, async () => (ran = true)))
      assert.isFalse(ran)
      assert.isFalse(existsSync(dirs.freezer!), 'the freezer group goes with the others')
    })
      .timeout(60_000)
      .skip(!cgroupsWritable() || !cgroupBases()?.freezer, `${SKIP}, and the v1 freezer`)

    test('an agent a dead service left frozen is thawed by the next one that adopts it', async ({
      assert,
    }) => {
      const agentId = randomUUID()
      const spec = fixtureSpec(agentId)
      await harness.runtime.ensureStarted(spec, { waitReady: true })
      const cgroup = new AgentCgroup(agentId, cgroupBases()!)
      assert.strictEqual(await cgroup.freeze(), true)
      assert.equal(read(cgroup.dirs.freezer!, 'freezer.state'), 'FROZEN')

      await harness.restartService()
      await harness.runtime.ensureStarted(spec, { waitReady: true, timeoutMs: 20_000 })
      assert.equal(read(cgroup.dirs.freezer!, 'freezer.state'), 'THAWED')
      const reply = await harness.runtime.chat(agentId, {
        conversationId: 'c',
        messages: [{ role: 'user', content: 'awake?' }],
      })
      assert.equal(reply.content, 'echo: awake?')
    })
      .timeout(60_000)
      .skip(!cgroupsWritable() || !cgroupBases()?.freezer, `${SKIP}, and the v1 freezer`)
  }
)
