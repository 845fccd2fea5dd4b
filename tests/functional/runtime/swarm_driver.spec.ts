import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import Docker from 'dockerode'
import { dockerConfigured } from '#runtime/docker/docker_driver'
import { dockerNames } from '#runtime/docker/container_spec'
import { RuntimeService } from '#runtime/runtime_service'
import { SwarmDriver } from '#runtime/swarm/swarm_driver'
import { lucidStateDatabase } from '#runtime/swarm/lucid_state'
import { fixtureSpec, testRegistry, waitFor } from '#tests/helpers/runtime'

/**
 * The swarm driver against a live single-node swarm: the test initialises
 * the swarm when the engine is not part of one, and leaves it again after.
 */
let engineAbsent: boolean | undefined
async function noEngine(): Promise<boolean> {
  if (engineAbsent !== undefined) return engineAbsent
  engineAbsent =
    !dockerConfigured() ||
    !(await new Docker().ping().then(
      () => true,
      () => false
    ))
  if (engineAbsent) console.log('  SKIPPED: no Docker engine answers here')
  return engineAbsent
}

test.group('Runtime / swarm driver against a live single-node swarm', (group) => {
  const docker = new Docker()
  let agentsDir: string
  let initialised = false
  const drivers: SwarmDriver[] = []
  const created: string[] = []
  const state = { db: lucidStateDatabase, key: randomBytes(32) }
  // What the drivers logged: a failure shows the state's moves (tasks released, snapshots).
  const logged: string[] = []
  const log = (message: string, detail?: Record<string, unknown>) =>
    logged.push(`${message} ${JSON.stringify(detail ?? {})}`)
  const readNote = (files: { read(path: string): Promise<unknown> }) =>
    files.read('notes/a.txt').catch((error: Error) => {
      throw new Error(`${error.message}; the driver logged: ${logged.slice(-6).join(' | ')}`)
    })

  function swarmRuntime(
    sleep: 'stop' | 'pause' = 'stop',
    snapshotEveryMs?: number
  ): {
    runtime: RuntimeService
    driver: SwarmDriver
  } {
    const driver = new SwarmDriver({
      agentsDir,
      pollIntervalMs: 500,
      stopGraceMs: 3000,
      state: { ...state, snapshotEveryMs },
      sleep,
      log,
    })
    drivers.push(driver)
    return { driver, runtime: undefined as unknown as RuntimeService }
  }

  group.setup(async () => {
    if (await noEngine()) return
    agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-swarm-'))
    const info = (await docker.info()) as { Swarm?: { LocalNodeState?: string } }
    if (info.Swarm?.LocalNodeState !== 'active') {
      await docker.swarmInit({ ListenAddr: '127.0.0.1:2377', AdvertiseAddr: '127.0.0.1' })
      initialised = true
    }
  })
  group.teardown(async () => {
    if (!agentsDir) return
    const cleanup = new SwarmDriver({ agentsDir, state })
    for (const agentId of created) await cleanup.remove(agentId).catch(() => undefined)
    for (const driver of [...drivers, cleanup]) await driver.close()
    if (initialised) await docker.swarmLeave({ force: true }).catch(() => undefined)
    await rm(agentsDir, { recursive: true, force: true })
  })

  test(
    'an agent is a one-replica service: ready, chat, files, limits, stop scales to 0, start, remove'
  )
    .skip(() => engineAbsent === true, 'no Docker engine')
    .timeout(300_000)
    .run(async ({ assert }) => {
      if (await noEngine()) return
      const { driver } = swarmRuntime()
      const runtime = new RuntimeService({ driver, frameworks: await testRegistry(), agentsDir })
      const agentId = randomUUID()
      created.push(agentId)

      const started = await runtime.ensureStarted(fixtureSpec(agentId), {
        waitReady: true,
        timeoutMs: 240_000,
      })
      assert.equal(started.driver, 'swarm')
      assert.equal(started.state, 'running')

      const service = await docker.getService(dockerNames(agentId).container).inspect()
      assert.equal(service.Spec.Mode.Replicated.Replicas, 1)
      const task = service.Spec.TaskTemplate
      assert.deepEqual(task.ContainerSpec.CapabilityDrop, ['ALL'])
      assert.isTrue(task.ContainerSpec.ReadOnly)
      assert.equal(task.Resources.Limits.MemoryBytes, 256 * 1024 * 1024)
      assert.equal(task.Resources.Reservations.MemoryBytes, 256 * 1024 * 1024)
      assert.equal(task.Resources.Limits.Pids, 64)
      assert.equal(task.RestartPolicy.Condition, 'on-failure')
      // Not pinned to a node: the task starts behind the gate that waits for its state.
      assert.isUndefined(task.Placement?.Constraints)
      assert.deepEqual(task.ContainerSpec.Command.slice(0, 2), ['/bin/sh', '-c'])
      assert.include(task.ContainerSpec.Env, 'AGENT_HOST_TASK={{.Task.ID}}')

      const reply = await runtime.chat(agentId, {
        conversationId: 'c',
        messages: [{ role: 'user', content: 'hello swarm' }],
      })
      assert.equal(reply.content, 'echo: hello swarm')
      const files = await runtime.files(agentId)
      await files.write('/notes/a.txt', 'in a task')
      assert.deepEqual(await readNote(files), { content: 'in a task', size: 9 })
      const figures = await runtime.monitoring(agentId)
      assert.isAbove(figures.memoryMb, 5)

      await runtime.stop(agentId)
      const stoppedStatus = await runtime.status(agentId)
      assert.equal(stoppedStatus.state, 'stopped')
      const scaled = await docker.getService(dockerNames(agentId).container).inspect()
      assert.equal(scaled.Spec.Mode.Replicated.Replicas, 0, 'stopping scales to 0')

      // The state kept the file: a new task (on a fresh volume) sees it.
      await runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true, timeoutMs: 120_000 })
      const again = await runtime.files(agentId)
      assert.deepEqual(await readNote(again), { content: 'in a task', size: 9 })

      await runtime.remove(agentId)
      const removedStatus = await runtime.status(agentId)
      assert.equal(removedStatus.state, 'absent')
      const volumes = await docker.listVolumes({
        filters: { label: [`agent-host.agent-id=${agentId}`] },
      })
      assert.lengthOf(volumes.Volumes ?? [], 0, 'its volumes are gone')
    })

  test('two service instances creating one agent at once make one service, never two')
    .skip(() => engineAbsent === true, 'no Docker engine')
    .timeout(300_000)
    .run(async ({ assert }) => {
      if (await noEngine()) return
      const registry = await testRegistry()
      const first = new RuntimeService({
        driver: swarmRuntime().driver,
        frameworks: registry,
        agentsDir,
      })
      const second = new RuntimeService({
        driver: swarmRuntime().driver,
        frameworks: registry,
        agentsDir,
      })
      const agentId = randomUUID()
      created.push(agentId)
      const results = await Promise.allSettled([
        first.ensureStarted(fixtureSpec(agentId), { waitReady: true, timeoutMs: 240_000 }),
        second.ensureStarted(fixtureSpec(agentId), { waitReady: true, timeoutMs: 240_000 }),
      ])
      assert.isTrue(results.some((result) => result.status === 'fulfilled'))
      const services = await docker.listServices({
        filters: { name: [dockerNames(agentId).container] },
      })
      assert.lengthOf(services, 1)
      const running = (await docker.listTasks({
        filters: { 'service': [dockerNames(agentId).container], 'desired-state': ['running'] },
      })) as any[]
      assert.lengthOf(running, 1, 'one task runs the agent')
    })

  test(
    'SWARM_SLEEP=pause: a sleep freezes the task, a wake thaws the same process; a new config boots'
  )
    .skip(() => engineAbsent === true, 'no Docker engine')
    .timeout(300_000)
    .run(async ({ assert }) => {
      if (await noEngine()) return
      const { driver } = swarmRuntime('pause')
      const runtime = new RuntimeService({ driver, frameworks: await testRegistry(), agentsDir })
      const events: string[] = []
      runtime.onEvent((event) =>
        events.push(event.type === 'started' && event.restored ? 'restored' : event.type)
      )
      const agentId = randomUUID()
      created.push(agentId)
      const count = async () => {
        const reply = await runtime.chat(agentId, {
          conversationId: 'c',
          messages: [{ role: 'user', content: '__count__' }],
        })
        return reply.content.split(' ')[1]
      }
      await runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true, timeoutMs: 240_000 })
      assert.equal(await count(), '1')

      await runtime.sleep(agentId, { warmUp: false })
      const asleep = await runtime.status(agentId)
      assert.equal(asleep.state, 'stopped')
      const [task] = (await docker.listContainers({
        filters: { label: [`agent-host.agent-id=${agentId}`] },
      })) as Array<{ State: string }>
      assert.equal(task.State, 'paused', 'its container is frozen, not stopped')
      assert.isTrue(driver.resumes(agentId))
      // The reconciler's sweep (it keeps only agents awake) leaves a frozen one asleep.
      const others = created.filter((id) => id !== agentId)
      assert.notInclude(await driver.sweep(others), agentId)

      // The wake goes on in the same process: its in-memory count continues.
      await runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true, timeoutMs: 60_000 })
      assert.equal(await count(), '2')
      assert.include(events, 'restored')

      // Asleep with a new config: the wake boots it (a fresh count).
      await runtime.sleep(agentId, { warmUp: false })
      const changed = fixtureSpec(agentId, { personality: 'Another one' })
      await runtime.ensureStarted(changed, { waitReady: true, timeoutMs: 240_000 })
      assert.equal(await count(), '1')
      const files = await runtime.files(agentId)
      const soul = await files.read('SOUL.md')
      assert.equal(soul.content, 'Another one')
    })

  test(
    'a crash restart keeps what the agent wrote just before it (the ended task is shipped first)'
  )
    .skip(() => engineAbsent === true, 'no Docker engine')
    .timeout(300_000)
    .run(async ({ assert }) => {
      if (await noEngine()) return
      // No periodic snapshot within the test: only the ended task's own can carry the file.
      const { driver } = swarmRuntime('stop', 60_000)
      const runtime = new RuntimeService({ driver, frameworks: await testRegistry(), agentsDir })
      const agentId = randomUUID()
      created.push(agentId)
      await runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true, timeoutMs: 240_000 })
      const before = await runtime.status(agentId)
      const files = await runtime.files(agentId)
      await files.write('/late.txt', 'written just before the crash')
      await runtime
        .chat(agentId, { conversationId: 'c', messages: [{ role: 'user', content: '__crash__' }] })
        .catch(() => undefined)

      await waitFor(
        'a new task answering after the crash',
        async () => {
          const info = await runtime.status(agentId)
          if (info.state !== 'running' || info.startedAt?.getTime() === before.startedAt?.getTime())
            return false
          const reply = await runtime
            .chat(agentId, { conversationId: 'c', messages: [{ role: 'user', content: 'up?' }] })
            .catch(() => undefined)
          return reply?.content === 'echo: up?'
        },
        120_000
      )
      const again = await runtime.files(agentId)
      const read = await again.read('late.txt')
      assert.equal(read.content, 'written just before the crash')
    })
})
