/**
 * bench/scale-out, part (b): a swarm node lost under load. On a real 3-node
 * swarm built on this machine (tests/helpers/swarm_cluster.ts), N fixture
 * agents are started through the runtime and spread by the scheduler; every
 * agent writes a file that must survive; after a snapshot of each, a worker
 * is killed (engine and containers, SIGKILL) while a client chats with
 * every agent round-robin and reads their status. Reported: when each agent
 * of the killed node answered again, counted from the kill (p50, p100), and
 * the requests that failed meanwhile: chats to the lost node's agents
 * (their container is gone until they are back; the HTTP API answers those
 * on the hosted path), chats to the other agents and status reads (the API's
 * own reads).
 *
 *   DATABASE_URL=postgres://... npm run bench:scale-out-swarm -- \
 *     [--agents 60] [--heartbeat-ms 5000] [--snapshot-secs 30] [--json] [--verbose]
 *
 * Needs root and a Docker engine (Debian docker.io); migrates DATABASE_URL
 * first (the swarm state table). Tears everything down at the end.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { loadPlugins } from '#plugins/plugin_loader'
import { PluginRegistry } from '#plugins/plugin_registry'
import { dockerNames } from '#runtime/docker/container_spec'
import { RuntimeService } from '#runtime/runtime_service'
import { SwarmDriver } from '#runtime/swarm/swarm_driver'
import { startSwarmCluster } from '../../tests/helpers/swarm_cluster.ts'
import {
  inBatches,
  log,
  percentile,
  pgStateDatabase,
  prepareSwarmBench,
  root,
  secs,
} from './swarm_shared.ts'

const { values } = parseArgs({
  options: {
    'agents': { type: 'string', default: '60' },
    'heartbeat-ms': { type: 'string', default: '5000' },
    'snapshot-secs': { type: 'string', default: '30' },
    'json': { type: 'boolean', default: false },
    'verbose': { type: 'boolean', default: false },
  },
})
const agentCount = Math.max(3, Number(values.agents))
const heartbeatMs = Number(values['heartbeat-ms'])
const snapshotEveryMs = Number(values['snapshot-secs']) * 1000

await prepareSwarmBench()
const { db: stateDb, end: endPool } = pgStateDatabase()

const started = Date.now()
log(`building the 3-node swarm (heartbeat ${heartbeatMs} ms)`)
const cluster = await startSwarmCluster({ name: 'agent-host-swarm-bench', heartbeatMs })
const agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-swarm-bench-'))
let driver: SwarmDriver | undefined
try {
  const registry = new PluginRegistry(await loadPlugins(join(root, 'tests/fixtures/plugins')))
  const launch = registry
    .framework('fixture')
    .containerLaunch({ modelProxy: { baseUrl: '' } } as never)
  await cluster.loadFrameworkImage(launch)
  log(`swarm ready in ${secs(Date.now() - started)} s`)

  driver = new SwarmDriver({
    agentsDir,
    docker: cluster.manager,
    images: 'local',
    stopGraceMs: 3000,
    state: { db: stateDb, key: randomBytes(32), snapshotEveryMs },
    log: values.verbose
      ? (message, detail) => log(`${message} ${JSON.stringify(detail ?? {})}`)
      : undefined,
  })
  const runtime = new RuntimeService({ driver, frameworks: registry, agentsDir })
  const agents = Array.from({ length: agentCount }, () => randomUUID())
  const spec = (agentId: string) => ({
    agentId,
    framework: 'fixture',
    config: { personality: 'A benchmark agent.' },
    modelProxy: { baseUrl: 'http://127.0.0.1:9/v1', token: 'bench', model: 'stand-in' },
  })
  const bootStart = Date.now()
  await inBatches(agents, 10, (agentId) =>
    runtime.ensureStarted(spec(agentId), { waitReady: true, timeoutMs: 300_000 })
  )
  log(`${agentCount} agents ready in ${secs(Date.now() - bootStart)} s`)

  const nodeOf = new Map<string, string>()
  for (const agentId of agents) {
    const tasks = (await cluster.manager.listTasks({
      filters: { 'service': [dockerNames(agentId).container], 'desired-state': ['running'] },
    })) as any[]
    nodeOf.set(agentId, tasks[0].NodeID)
  }
  const perNode = cluster.nodes.map(
    (node) => agents.filter((agentId) => nodeOf.get(agentId) === node.nodeId).length
  )
  log(`agents per node: ${perNode.join(' / ')}`)

  // What must survive: a file each, in a snapshot taken after it.
  await inBatches(agents, 10, async (agentId) => {
    const files = await runtime.files(agentId)
    await files.write('/bench.txt', agentId)
  })
  log(`files written; waiting ${secs(snapshotEveryMs + 5000)} s for a snapshot of each`)
  await new Promise((resolve) => setTimeout(resolve, snapshotEveryMs + 5000))

  const victim = cluster.nodes
    .filter((node) => !node.manager)
    .sort((a, b) => perNode[cluster.nodes.indexOf(b)] - perNode[cluster.nodes.indexOf(a)])[0]
  const lost = agents.filter((agentId) => nodeOf.get(agentId) === victim.nodeId)
  const lostSet = new Set(lost)

  // The client: chats round-robin over every agent (4 in flight) and status reads, until all are back.
  const counts = {
    lostChats: 0,
    lostFailed: 0,
    otherChats: 0,
    otherFailed: 0,
    reads: 0,
    readsFailed: 0,
  }
  let killedAt = 0
  let stop = false
  let next = 0
  const chatter = async () => {
    while (!stop) {
      const agentId = agents[next++ % agents.length]
      const lostOne = lostSet.has(agentId)
      try {
        await runtime.chat(agentId, {
          conversationId: 'bench',
          messages: [{ role: 'user', content: 'ping' }],
          signal: AbortSignal.timeout(5000),
        })
        if (killedAt) counts[lostOne ? 'lostChats' : 'otherChats']++
      } catch {
        if (killedAt) {
          counts[lostOne ? 'lostChats' : 'otherChats']++
          counts[lostOne ? 'lostFailed' : 'otherFailed']++
        }
      }
    }
  }
  const reader = async () => {
    while (!stop) {
      const agentId = agents[Math.floor(Math.random() * agents.length)]
      try {
        await runtime.status(agentId)
      } catch {
        if (killedAt) counts.readsFailed++
      }
      if (killedAt) counts.reads++
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }
  // Each lost agent is probed every 250 ms from the kill: back once it answers from another node.
  const backAfter = new Map<string, number>()
  const probe = async (agentId: string) => {
    while (!stop && !backAfter.has(agentId)) {
      const info = await runtime.status(agentId).catch(() => undefined)
      if (
        info?.state === 'running' &&
        info.baseUrl &&
        !info.baseUrl.includes(`//${victim.address}:`)
      ) {
        const reply = await runtime
          .chat(agentId, {
            conversationId: 'probe',
            messages: [{ role: 'user', content: 'back?' }],
            signal: AbortSignal.timeout(2000),
          })
          .catch(() => undefined)
        if (reply) backAfter.set(agentId, Date.now() - killedAt)
      }
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }
  let downAfter: number | undefined
  const watchNode = async () => {
    while (!stop && downAfter === undefined) {
      const node = (await cluster.manager.getNode(victim.nodeId).inspect()) as any
      if (node.Status?.State === 'down') downAfter = Date.now() - killedAt
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }
  const clients = [chatter(), chatter(), chatter(), chatter(), reader()]
  await new Promise((resolve) => setTimeout(resolve, 3000))
  log(`killing ${victim.container} (${lost.length} agents)`)
  await cluster.kill(victim)
  killedAt = Date.now()
  const watchers = [...lost.map((agentId) => probe(agentId)), watchNode()]
  const deadline = killedAt + 300_000
  while (backAfter.size < lost.length && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  stop = true
  await Promise.all([...clients, ...watchers])
  const recovered = [...backAfter.values()]
  log(`node down after ${downAfter} ms; ${recovered.length} of ${lost.length} back; checking files`)

  let filesKept = 0
  for (const agentId of lost.filter((id) => backAfter.has(id))) {
    const files = await runtime.files(agentId)
    const read = await files.read('bench.txt').catch(() => undefined)
    if (read?.content === agentId) filesKept++
  }

  const result = {
    agents: agentCount,
    perNode,
    heartbeatMs,
    snapshotSecs: snapshotEveryMs / 1000,
    lostAgents: lost.length,
    nodeDownSecs: downAfter === undefined ? null : Number(secs(downAfter)),
    recovered: recovered.length,
    p50Secs: recovered.length ? Number(secs(percentile(recovered, 50))) : null,
    p100Secs: recovered.length ? Number(secs(Math.max(...recovered))) : null,
    filesKept,
    ...counts,
  }
  if (values.json) console.log(JSON.stringify(result))
  else {
    console.log(
      `\n| agents (per node) | swarm heartbeat | lost node's agents | node down after | back: p50 | back: p100 | files kept | chats to lost agents failed | chats to others failed | status reads failed |`
    )
    console.log(`|---|---|---|---|---|---|---|---|---|---|`)
    console.log(
      `| ${agentCount} (${perNode.join('/')}) | ${heartbeatMs / 1000} s | ${lost.length} (${recovered.length} back) | ${result.nodeDownSecs} s | ${result.p50Secs} s | ${result.p100Secs} s | ${filesKept}/${lost.length} | ${counts.lostFailed} of ${counts.lostChats} | ${counts.otherFailed} of ${counts.otherChats} | ${counts.readsFailed} of ${counts.reads} |`
    )
  }

  log('removing the agents')
  await cluster.revive(victim)
  await inBatches(agents, 10, (agentId) => runtime.remove(agentId))
} finally {
  await driver?.close()
  await cluster.teardown()
  await rm(agentsDir, { recursive: true, force: true })
  await endPool()
  log(`done in ${secs(Date.now() - started)} s`)
}
