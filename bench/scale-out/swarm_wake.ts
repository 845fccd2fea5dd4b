/**
 * bench/scale-out, swarm wake: a sleeping swarm agent's wake to its first
 * reply, with each way a swarm agent can sleep (docs/runtime.md "Many
 * machines"): `stop` (the default: the service scaled to 0, its state
 * shipped; a wake is a new task, a restore and a boot) and `pause`
 * (SWARM_SLEEP=pause: the task frozen in place; a wake thaws it). One agent
 * per mode on the 3-node swarm of tests/helpers/swarm_cluster.ts; each run
 * puts it to sleep through the runtime, waits, reads what it holds asleep,
 * then wakes it the way a message does (start, readiness, one chat). Modes
 * alternate run by run.
 *
 *   DATABASE_URL=postgres://... npm run bench:scale-out-swarm-wake -- \
 *     [--runs 5] [--framework fixture|openclaw] [--asleep-secs 3] [--json]
 *
 * OpenClaw's image is built from the runtime cache (STORAGE_DIR/runtime, the
 * package installed there first) and loaded into every node; its model calls
 * go to a local stand-in provider.
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
import { startFakeModelProvider } from '../../tests/helpers/fake_model_provider.ts'
import { startSwarmCluster } from '../../tests/helpers/swarm_cluster.ts'
import { benchAgentSpec, ensureOpenClawPackage } from '../shared/agents.ts'
import { log, pgStateDatabase, prepareSwarmBench, root, secs } from './swarm_shared.ts'

const { values } = parseArgs({
  options: {
    'runs': { type: 'string', default: '5' },
    'framework': { type: 'string', default: 'fixture' },
    'asleep-secs': { type: 'string', default: '3' },
    'json': { type: 'boolean', default: false },
  },
})
const runs = Math.max(1, Number(values.runs))
const framework = values.framework!
const asleepMs = Number(values['asleep-secs']) * 1000
const cacheDir = join(process.env.STORAGE_DIR ?? join(root, 'storage'), 'runtime')
type Mode = 'stop' | 'pause'
const MODES: Mode[] = ['stop', 'pause']

await prepareSwarmBench()
const { db, end: endPool } = pgStateDatabase()
const provider = await startFakeModelProvider({ reply: 'Benchmark reply.', host: '0.0.0.0' })
const started = Date.now()
const cluster = await startSwarmCluster({ name: 'agent-host-swarm-wake' })
const agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-swarm-wake-'))
const drivers: SwarmDriver[] = []
try {
  const registry = new PluginRegistry([
    ...(await loadPlugins(join(root, 'plugins'))),
    ...(await loadPlugins(join(root, 'tests/fixtures/plugins'))),
  ])
  if (framework === 'openclaw') await ensureOpenClawPackage(cacheDir)
  const providerUrl = provider.baseUrl.replace('127.0.0.1', cluster.gateway)
  const spec = (agentId: string) => benchAgentSpec(agentId, framework, providerUrl)
  const launch = registry.framework(framework).containerLaunch({
    ...spec('image'),
    driver: 'docker',
    port: 0,
    gatewayToken: '',
    paths: registry.framework(framework).containerPaths,
  } as never)
  await cluster.loadFrameworkImage(launch, cacheDir)
  log(`swarm and ${framework} image ready in ${secs(Date.now() - started)} s`)

  const key = randomBytes(32)
  const runtimes = new Map<Mode, RuntimeService>()
  for (const mode of MODES) {
    const driver = new SwarmDriver({
      agentsDir,
      docker: cluster.manager,
      images: 'local',
      cacheDir,
      stopGraceMs: 10_000,
      sleep: mode,
      state: { db, key },
    })
    drivers.push(driver)
    runtimes.set(mode, new RuntimeService({ driver, frameworks: registry, agentsDir }))
  }
  const agents = new Map(MODES.map((mode) => [mode, randomUUID()]))
  const chat = (mode: Mode) =>
    runtimes.get(mode)!.chat(agents.get(mode)!, {
      conversationId: 'bench',
      messages: [{ role: 'user', content: 'Hello?' }],
    })

  const cold: Record<Mode, number> = { stop: 0, pause: 0 }
  for (const mode of MODES) {
    const begin = Date.now()
    await runtimes.get(mode)!.ensureStarted(spec(agents.get(mode)!), {
      waitReady: true,
      timeoutMs: 300_000,
    })
    await chat(mode)
    cold[mode] = Date.now() - begin
    log(`${mode}: first boot to a reply in ${secs(cold[mode])} s`)
  }

  const samples: Array<{ mode: Mode; sleepMs: number; asleepMb: number; wakeMs: number }> = []
  for (let run = 1; run <= runs; run++) {
    for (const mode of run % 2 ? MODES : [...MODES].reverse()) {
      const runtime = runtimes.get(mode)!
      const agentId = agents.get(mode)!
      const sleepStart = Date.now()
      await runtime.sleep(agentId, { warmUp: false })
      const sleepMs = Date.now() - sleepStart
      await new Promise((resolve) => setTimeout(resolve, asleepMs))
      // What it holds asleep: the frozen container's memory on its node (none once stopped).
      let asleepMb = 0
      const tasks = (await cluster.manager.listTasks({
        filters: { 'service': [dockerNames(agentId).container], 'desired-state': ['running'] },
      })) as any[]
      const task = tasks.find((item) => item.Status?.State === 'running')
      const node = cluster.nodes.find((item) => item.nodeId === task?.NodeID)
      if (task && node) {
        const stats = (await node.engine
          .getContainer(task.Status.ContainerStatus.ContainerID)
          .stats({ stream: false })) as any
        const cache = stats.memory_stats?.stats?.cache ?? 0
        asleepMb = ((stats.memory_stats?.usage ?? 0) - cache) / 1024 / 1024
      }
      const wakeStart = Date.now()
      await runtime.ensureStarted(spec(agentId), { waitReady: true, timeoutMs: 300_000 })
      await chat(mode)
      const wakeMs = Date.now() - wakeStart
      samples.push({ mode, sleepMs, asleepMb, wakeMs })
      log(
        `run ${run} ${mode}: sleep ${secs(sleepMs)} s, asleep ${asleepMb.toFixed(0)} MB, wake to reply ${secs(wakeMs)} s`
      )
    }
  }

  const median = (numbers: number[]) =>
    [...numbers].sort((a, b) => a - b)[Math.floor(numbers.length / 2)]
  const rows = MODES.map((mode) => {
    const of = samples.filter((sample) => sample.mode === mode)
    return {
      mode,
      firstBootSecs: Number(secs(cold[mode])),
      sleepSecs: Number(secs(median(of.map((sample) => sample.sleepMs)))),
      asleepMb: Math.round(median(of.map((sample) => sample.asleepMb))),
      wakeMedianSecs: Number(secs(median(of.map((sample) => sample.wakeMs)))),
      wakeMinSecs: Number(secs(Math.min(...of.map((sample) => sample.wakeMs)))),
      wakeMaxSecs: Number(secs(Math.max(...of.map((sample) => sample.wakeMs)))),
    }
  })
  if (values.json) console.log(JSON.stringify({ framework, runs, rows }))
  else {
    console.log(`\n${framework}, ${runs} runs per mode, 3-node swarm`)
    console.log(
      '| sleep mode | first boot to reply | sleep took | held asleep on its node | wake to reply: median (min-max) |'
    )
    console.log('|---|---|---|---|---|')
    for (const row of rows) {
      console.log(
        `| ${row.mode} | ${row.firstBootSecs} s | ${row.sleepSecs} s | ${row.asleepMb} MB | ${row.wakeMedianSecs} s (${row.wakeMinSecs}-${row.wakeMaxSecs}) |`
      )
    }
  }
  for (const mode of MODES) await runtimes.get(mode)!.remove(agents.get(mode)!)
} finally {
  for (const driver of drivers) await driver.close()
  await cluster.teardown()
  await provider.close()
  await rm(agentsDir, { recursive: true, force: true })
  await endPool()
  log(`done in ${secs(Date.now() - started)} s`)
}
