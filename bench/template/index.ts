/**
 * bench/template: a new agent's start to its first container-served reply,
 * from its framework's template checkpoint side by side with a cold boot
 * (docs/runtime.md "New agents from a template"), on the process driver with
 * the real sandbox, CRIU and network namespaces.
 *
 *   npm run bench:template -- [--runs 5] [--framework fixture|openclaw] [--json]
 *
 * Each run creates a fresh agent (start, readiness, one chat) and times it
 * to the reply. CPU: the agent's process tree (CRIU's restore included) plus,
 * for the template, what the service itself spent making the agent's copy of
 * the images (read from its own CPU time over the start, so it is an upper
 * bound). The template is built before the runs, untimed
 * (ProcessDriver.prepareTemplate). Runs of the two modes alternate.
 */
import { randomUUID } from 'node:crypto'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { loadPlugins } from '#plugins/plugin_loader'
import { PluginRegistry } from '#plugins/plugin_registry'
import { agentPaths } from '#runtime/agent_paths'
import { criu } from '#runtime/process/checkpoint'
import { ProcessDriver } from '#runtime/process/process_driver'
import { RuntimeService } from '#runtime/runtime_service'
import { treeCpuSecs } from '../shared/process_tree.ts'
import { benchAgentSpec, ensureOpenClawPackage } from '../shared/agents.ts'
import { startFakeModelProvider } from '../../tests/helpers/fake_model_provider.ts'

const root = join(import.meta.dirname, '..', '..')
const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    framework: { type: 'string', default: 'fixture' },
    json: { type: 'boolean', default: false },
  },
})
const runs = Math.max(1, Number(values.runs))
const framework = values.framework!
const storage = process.env.STORAGE_DIR ?? join(root, 'storage')
const cacheDir = join(storage, 'runtime')

type Mode = 'cold boot' | 'template'

interface Sample {
  mode: Mode
  run: number
  /** Create to the first container-served reply. */
  secs: number
  /** CPU of the agent's processes to that reply. */
  agentCpuSecs: number
  /** CPU of the service process over the start (the template copy's share). */
  serviceCpuSecs: number
  fromTemplate: boolean
}

const fmt = (value: number, digits = 1) => value.toFixed(digits)
const median = (numbers: number[]) => {
  const sorted = [...numbers].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}
const percentile = (numbers: number[], p: number) => {
  const sorted = [...numbers].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

async function main() {
  if (!criu().path) throw new Error(`no checkpoints here: ${criu().reason}`)
  const registry = new PluginRegistry([
    ...(await loadPlugins(join(root, 'plugins'))),
    ...(await loadPlugins(join(root, 'tests/fixtures/plugins'))),
  ])
  if (!registry.framework(framework).template) {
    throw new Error(`${framework} does not start from templates (its plugin has no \`template\`)`)
  }
  const provider = await startFakeModelProvider({ reply: 'Benchmark reply.' })
  const folders: string[] = []
  const make = async (mode: Mode) => {
    const agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-bench-template-'))
    folders.push(agentsDir)
    const driver = new ProcessDriver({
      agentsDir,
      cacheDir,
      stopGraceMs: 15_000,
      templates: mode === 'template',
      log: (message) => {
        if (/template/.test(message)) console.error(`  [${mode}] ${message}`)
      },
    })
    const runtime = new RuntimeService({ driver, frameworks: registry, agentsDir })
    const events = new Set<string>()
    runtime.onEvent((event) => {
      if (event.type === 'started' && event.fromTemplate) events.add(event.agentId)
    })
    return { mode, driver, runtime, agentsDir, fromTemplate: events }
  }
  const modes = [await make('cold boot'), await make('template')]
  const samples: Sample[] = []
  const specFor = (agentId: string) => benchAgentSpec(agentId, framework, provider.baseUrl)
  try {
    if (framework === 'openclaw') {
      await ensureOpenClawPackage(cacheDir)
      // Its shared compile cache, warmed as the service does at start (one untimed boot).
      await modes[0].driver.prepareFrameworks([registry.framework(framework)])
    }
    // Untimed: the template is built ahead of the runs (one framework boot at a time).
    {
      const t0 = performance.now()
      const built = await modes[1].driver.prepareTemplate(
        specFor(randomUUID()),
        registry.framework(framework)
      )
      if (!built) throw new Error('no template could be built (the service log says why)')
      console.error(`template built in ${fmt((performance.now() - t0) / 1000, 1)} s`)
    }
    for (let run = 1; run <= runs; run++) {
      for (const { mode, runtime, agentsDir, fromTemplate } of modes) {
        const agentId = randomUUID()
        const cpu0 = process.cpuUsage()
        const t0 = performance.now()
        await runtime.ensureStarted(specFor(agentId))
        await runtime.waitUntilReady(agentId, { timeoutMs: 300_000 })
        const answer = await runtime
          .chat(agentId, {
            conversationId: 'bench',
            messages: [{ role: 'user', content: 'hello' }],
          })
          .catch(async (error) => {
            // What the framework said is the only clue to a failed run: print its log's end.
            const log = await readFile(agentPaths(agentsDir, agentId).logFile, 'utf8').catch(
              () => ''
            )
            console.error(`${mode}: the agent's log ends with:\n${log.slice(-6000)}`)
            throw error
          })
        const secs = (performance.now() - t0) / 1000
        const cpu = process.cpuUsage(cpu0)
        if (!answer.content) throw new Error('empty reply')
        const agentCpuSecs = await treeCpuSecs(agentsDir, agentId)
        await runtime.remove(agentId)
        const sample = {
          mode,
          run,
          secs,
          agentCpuSecs,
          serviceCpuSecs: (cpu.user + cpu.system) / 1e6,
          fromTemplate: fromTemplate.has(agentId),
        }
        samples.push(sample)
        console.error(
          `${mode} run ${run}: ${fmt(secs, 2)} s to the first reply, agent CPU ${fmt(agentCpuSecs, 2)} s, service CPU ${fmt(sample.serviceCpuSecs, 2)} s${mode === 'template' && !sample.fromTemplate ? ' (booted cold!)' : ''}`
        )
      }
    }
  } finally {
    for (const { driver, runtime } of modes) {
      await driver.sweep([])
      await runtime.shutdown()
    }
    await provider.close()
    for (const folder of folders) await rm(folder, { recursive: true, force: true })
  }

  const rows = modes.map(({ mode, driver }) => {
    const mine = samples.filter((sample) => sample.mode === mode)
    const pick = (key: 'secs' | 'agentCpuSecs' | 'serviceCpuSecs') => mine.map((s) => s[key])
    return {
      mode,
      runs: mine.length,
      fromTemplate: mine.filter((sample) => sample.fromTemplate).length,
      p50: median(pick('secs')),
      p95: percentile(pick('secs'), 95),
      agentCpu: median(pick('agentCpuSecs')),
      serviceCpu: median(pick('serviceCpuSecs')),
      counts: driver.templateCounts(),
    }
  })
  if (values.json) {
    console.log(
      JSON.stringify({ node: process.version, cpus: cpus().length, samples, rows }, null, 2)
    )
    return
  }
  const cold = rows[0]
  console.log(
    `\nnew ${framework} agent, create to its first container-served reply (process driver, Node ${process.version}, ${cpus().length} CPUs)`
  )
  console.log(
    `${'start by'.padEnd(10)} runs  from template  p50 s  p95 s  vs cold  agent CPU s  service CPU s  CPU (both) vs cold`
  )
  for (const row of rows) {
    const cpu = row.agentCpu + row.serviceCpu
    const coldCpu = cold.agentCpu + cold.serviceCpu
    console.log(
      [
        row.mode.padEnd(10),
        String(row.runs).padStart(4),
        String(row.fromTemplate).padStart(14),
        fmt(row.p50, 2).padStart(6),
        fmt(row.p95, 2).padStart(6),
        `${fmt(row.p50 / cold.p50, 3)}x`.padStart(8),
        fmt(row.agentCpu, 2).padStart(12),
        fmt(row.serviceCpu, 2).padStart(14),
        `${fmt(cpu / coldCpu, 3)}x`.padStart(12),
      ].join(' ')
    )
  }
  console.log(`template mode counts: ${JSON.stringify(rows[1].counts)}`)
}

await main()
