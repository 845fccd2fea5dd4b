import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import type Docker from 'dockerode'
import { dockerNames, LABELS } from '#runtime/docker/container_spec'
import { RuntimeService } from '#runtime/runtime_service'
import { lucidStateDatabase } from '#runtime/swarm/lucid_state'
import { StateStore } from '#runtime/swarm/state_store'
import { SwarmDriver } from '#runtime/swarm/swarm_driver'
import { fixtureSpec, testRegistry, waitFor } from '#tests/helpers/runtime'
import {
  clusterUnavailable,
  startSwarmCluster,
  type ClusterNode,
  type SwarmCluster,
} from '#tests/helpers/swarm_cluster'

/**
 * The swarm driver on a real 3-node swarm built on this machine
 * (tests/helpers/swarm_cluster.ts): agents spread over the nodes, a worker
 * is killed with its engine and containers, and its agents answer again
 * from another node with the files and memory of their last snapshot; the
 * node comes back without starting any of them twice. Skipped where no
 * Docker engine runs (as the other docker and swarm tests).
 */
const AGENTS = 6
/** Snapshots every 5 s here (30 s by default) so the test need not wait long for one. */
const SNAPSHOT_EVERY_MS = 5000
/** What the fixture's containerLaunch reads to name its image. */
const fixtureContext = { modelProxy: { baseUrl: '' } } as never

async function nodeOfAgent(manager: Docker, agentId: string): Promise<string | undefined> {
  const tasks = (await manager.listTasks({
    filters: { 'service': [dockerNames(agentId).container], 'desired-state': ['running'] },
  })) as any[]
  const running = tasks.filter((task) => task.Status?.State === 'running')
  return running.length === 1 ? running[0].NodeID : undefined
}

test.group('Faults / a swarm node lost under running agents', (group) => {
  let unavailable: string | undefined
  let cluster: SwarmCluster | undefined
  let agentsDir: string
  let driver: SwarmDriver | undefined
  const key = randomBytes(32)

  group.setup(async () => {
    unavailable = await clusterUnavailable()
    if (unavailable) console.log(`  SKIPPED: ${unavailable}`)
  })
  group.teardown(async () => {
    await driver?.close()
    await cluster?.teardown()
    if (agentsDir) await rm(agentsDir, { recursive: true, force: true })
  })

  test(
    'agents spread over 3 nodes; a worker killed: its agents answer from another node with their files; it returns and starts none twice; nothing left behind'
  )
    .skip(() => unavailable !== undefined, 'no Docker engine')
    .timeout(600_000)
    .run(async ({ assert }) => {
      cluster = await startSwarmCluster({ name: 'agent-host-swarm-fault' })
      agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-swarm-cluster-'))
      const registry = await testRegistry()
      const launch = registry.framework('fixture').containerLaunch(fixtureContext)
      await cluster.loadFrameworkImage(launch)

      driver = new SwarmDriver({
        agentsDir,
        docker: cluster.manager,
        images: 'local',
        pollIntervalMs: 1000,
        stopGraceMs: 3000,
        state: {
          db: lucidStateDatabase,
          key,
          snapshotEveryMs: SNAPSHOT_EVERY_MS,
          collectEveryMs: 5000,
        },
        // SWARM_TEST_LOG=1 prints the driver's steps (gates opened, snapshots).
        log: process.env.SWARM_TEST_LOG
          ? (message, detail) => console.log(new Date().toISOString(), message, detail ?? '')
          : undefined,
      })
      const runtime = new RuntimeService({ driver, frameworks: registry, agentsDir })
      const store = new StateStore(lucidStateDatabase, key)
      const agents = Array.from({ length: AGENTS }, () => randomUUID())

      // Up, spread by the scheduler (no agent is pinned to a node).
      await Promise.all(
        agents.map((agentId) =>
          runtime.ensureStarted(fixtureSpec(agentId), { waitReady: true, timeoutMs: 180_000 })
        )
      )
      const placed = new Map<string, string>()
      for (const agentId of agents)
        placed.set(agentId, (await nodeOfAgent(cluster.manager, agentId))!)
      const spec = await cluster.manager.getService(dockerNames(agents[0]).container).inspect()
      assert.isUndefined(spec.Spec.TaskTemplate.Placement?.Constraints, 'no placement pin')
      assert.isAtLeast(new Set(placed.values()).size, 2, 'agents on at least two nodes')

      // Each agent's own workspace file and memory, then a snapshot taken after them.
      for (const agentId of agents) {
        const files = await runtime.files(agentId)
        await files.write('/notes/mine.txt', `belongs to ${agentId}`)
        await runtime.chat(agentId, {
          conversationId: 'c',
          messages: [{ role: 'user', content: `__remember__ owner=${agentId}` }],
        })
      }
      const written = Date.now()
      await waitFor(
        'a snapshot of every agent after its writes',
        async () => {
          for (const agentId of agents) {
            const row = await store.peek(agentId)
            if (!row?.takenAt || row.takenAt.getTime() <= written) return false
          }
          return true
        },
        60_000
      )

      // The worker running the most agents dies with its engine and containers.
      const workers = cluster.nodes.filter((node) => !node.manager)
      const count = (node: ClusterNode) =>
        agents.filter((id) => placed.get(id) === node.nodeId).length
      const victim = workers.sort((a, b) => count(b) - count(a))[0]
      const moved = agents.filter((id) => placed.get(id) === victim.nodeId)
      const stayed = agents.filter((id) => placed.get(id) !== victim.nodeId)
      assert.isAbove(moved.length, 0, 'the killed node ran agents')
      await cluster.kill(victim)
      const killedAt = Date.now()
      if (process.env.SWARM_TEST_LOG) console.log(new Date().toISOString(), 'killed', victim.nodeId)

      // Every moved agent answers again from another node; the others never stop answering;
      // the runtime's reads (what the API serves) never fail.
      const back = new Map<string, number>()
      let failedReads = 0
      let failedSurvivorChats = 0
      await waitFor(
        "the killed node's agents answering from another node",
        async () => {
          for (const agentId of agents) {
            await runtime.status(agentId).catch(() => failedReads++)
          }
          for (const agentId of stayed) {
            await runtime
              .chat(agentId, {
                conversationId: 'c',
                messages: [{ role: 'user', content: 'still' }],
              })
              .catch(() => failedSurvivorChats++)
          }
          for (const agentId of moved.filter((id) => !back.has(id))) {
            const node = await nodeOfAgent(cluster!.manager, agentId)
            if (!node || node === victim.nodeId) continue
            const reply = await runtime
              .chat(agentId, {
                conversationId: 'c',
                messages: [{ role: 'user', content: 'back?' }],
              })
              .catch(() => undefined)
            if (reply?.content === 'echo: back?') back.set(agentId, Date.now() - killedAt)
          }
          return back.size === moved.length
        },
        180_000
      )
      console.log(
        `  ${moved.length} agents of the killed node answered again after ${[...back.values()]
          .map((ms) => `${(ms / 1000).toFixed(1)} s`)
          .join(', ')}`
      )
      assert.equal(failedReads, 0, 'runtime reads answered throughout')
      assert.equal(failedSurvivorChats, 0, 'agents on the other nodes answered throughout')

      // With the workspace file and memory of their last snapshot, each its own.
      for (const agentId of moved) {
        const files = await runtime.files(agentId)
        assert.deepEqual(await files.read('notes/mine.txt'), {
          content: `belongs to ${agentId}`,
          size: `belongs to ${agentId}`.length,
        })
        assert.deepEqual(await runtime.memory(agentId), { owner: agentId })
      }

      // The node comes back: the swarm keeps one task per agent, and the old containers stay down.
      await cluster.revive(victim)
      const deadline = Date.now() + 15_000
      while (Date.now() < deadline) {
        for (const agentId of moved) {
          const running = (await cluster.manager.listTasks({
            filters: { 'service': [dockerNames(agentId).container], 'desired-state': ['running'] },
          })) as any[]
          assert.lengthOf(running, 1, 'one task meant to run')
          assert.notEqual(running[0].NodeID, victim.nodeId)
        }
        const onVictim = await victim.engine.listContainers({
          filters: { label: [`${LABELS.managed}=true`], status: ['running', 'restarting'] },
        })
        assert.lengthOf(onVictim, 0, 'nothing of the moved agents runs on the returned node')
        await new Promise((resolve) => setTimeout(resolve, 1000))
      }
      for (const agentId of moved) {
        const reply = await runtime.chat(agentId, {
          conversationId: 'c',
          messages: [{ role: 'user', content: 'after' }],
        })
        assert.equal(reply.content, 'echo: after')
      }
      // Its old tasks' containers and volumes are collected (never started again).
      await waitFor(
        "the returned node's old task volumes removed",
        async () => {
          const { Volumes } = await victim.engine.listVolumes({
            filters: { label: [`${LABELS.managed}=true`] },
          })
          const movedIds = new Set<string>(moved)
          const left = (Volumes ?? []).filter((volume) =>
            movedIds.has(volume.Labels?.[LABELS.agentId] ?? '')
          )
          return left.length === 0
        },
        60_000
      )

      // Removing the agents leaves nothing of them on any node nor in the store.
      for (const agentId of agents) await runtime.remove(agentId)
      for (const node of cluster.nodes) {
        const filters = { label: [`${LABELS.managed}=true`] }
        assert.lengthOf(await node.engine.listContainers({ all: true, filters }), 0)
        const { Volumes } = await node.engine.listVolumes({ filters })
        assert.lengthOf(Volumes ?? [], 0)
      }
      for (const agentId of agents) assert.isUndefined(await store.peek(agentId))
      await driver.close()
      driver = undefined
      await cluster.teardown()
      assert.deepEqual(await cluster.leftovers(), [], 'no node, disk or network left on the host')
      cluster = undefined
    })
})
