/**
 * bench/template/restores.ts: how often a template start fails. A template
 * is built (untimed), then `--copies` new agents are started from it,
 * `--parallel` at a time, each removed once it answered its readiness path;
 * `--templates N` builds N templates in turn (what a template held open at
 * its dump differs from build to build). Every start that was not a
 * template start is reported with why (the agent's log, and CRIU's own
 * account from the `template-restore.log` kept beside it, copied to /tmp).
 *
 *   npm run bench:template-restores -- [--copies 30] [--parallel 1] [--templates 1] [--framework openclaw]
 */
import { randomUUID } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { loadPlugins } from '#plugins/plugin_loader'
import { PluginRegistry } from '#plugins/plugin_registry'
import { agentPaths } from '#runtime/agent_paths'
import { criu } from '#runtime/process/checkpoint'
import { ProcessDriver } from '#runtime/process/process_driver'
import { RuntimeService } from '#runtime/runtime_service'
import { benchAgentSpec, ensureOpenClawPackage } from '../shared/agents.ts'
import { startFakeModelProvider } from '../../tests/helpers/fake_model_provider.ts'

const root = join(import.meta.dirname, '..', '..')
const { values } = parseArgs({
  options: {
    copies: { type: 'string', default: '30' },
    parallel: { type: 'string', default: '1' },
    templates: { type: 'string', default: '1' },
    framework: { type: 'string', default: 'openclaw' },
  },
})
const copies = Math.max(1, Number(values.copies))
const parallel = Math.max(1, Number(values.parallel))
const templates = Math.max(1, Number(values.templates))
const framework = values.framework!
const cacheDir = join(process.env.STORAGE_DIR ?? join(root, 'storage'), 'runtime')

async function main() {
  if (!criu().path) throw new Error(`no checkpoints here: ${criu().reason}`)
  const registry = new PluginRegistry([
    ...(await loadPlugins(join(root, 'plugins'))),
    ...(await loadPlugins(join(root, 'tests/fixtures/plugins'))),
  ])
  const plugin = registry.framework(framework)
  const provider = await startFakeModelProvider({ reply: 'Benchmark reply.' })
  const agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-bench-restores-'))
  const driver = new ProcessDriver({
    agentsDir,
    cacheDir,
    stopGraceMs: 15_000,
    templates: true,
    log: (message) => {
      if (/template/.test(message)) console.error(`  ${message}`)
    },
  })
  const runtime = new RuntimeService({ driver, frameworks: registry, agentsDir })
  const restored = new Set<string>()
  runtime.onEvent((event) => {
    if (event.type === 'started' && event.fromTemplate) restored.add(event.agentId)
  })
  const spec = (agentId: string) => benchAgentSpec(agentId, framework, provider.baseUrl)
  const failures: Array<{ copy: number; reason: string }> = []

  /** Starts copy number `copy` from the template, says how, and removes it. */
  const startOne = async (copy: number) => {
    const agentId = randomUUID()
    const dirty = /^Dirty:\s+(\d+)/m.exec(await readFile('/proc/meminfo', 'utf8'))?.[1]
    await runtime.ensureStarted(spec(agentId))
    await runtime.waitUntilReady(agentId, { timeoutMs: 300_000 })
    const paths = agentPaths(agentsDir, agentId)
    const log = await readFile(paths.logFile, 'utf8').catch(() => '')
    const loadavg = await readFile('/proc/loadavg', 'utf8')
    const load = `load ${loadavg.split(' ')[0]}, ${Math.round(Number(dirty) / 1024)} MB dirty at its start`
    if (restored.has(agentId)) {
      const steps = /template start: (.*)/.exec(log)?.[1] ?? ''
      console.error(`copy ${copy}: from the template (${load}; ${steps})`)
    } else {
      const reason =
        /(?:could not start from its template|no template start) \((.*)\): booting/.exec(
          log
        )?.[1] ?? '?'
      failures.push({ copy, reason })
      // CRIU's whole account, kept past the agent's removal.
      const criuLog = await readFile(join(paths.runtime, 'template-restore.log'), 'utf8').catch(
        () => ''
      )
      const kept = join(tmpdir(), `template-restore-${process.pid}-${copy}.log`)
      await writeFile(kept, criuLog)
      console.error(
        `copy ${copy}: NOT from the template (${load}): ${reason} (CRIU's log: ${kept})`
      )
    }
    await runtime.remove(agentId)
  }

  try {
    if (framework === 'openclaw') {
      await ensureOpenClawPackage(cacheDir)
      await driver.prepareFrameworks([plugin])
    }
    for (let template = 1; template <= templates; template++) {
      // Each build replaces the one before.
      const t0 = performance.now()
      if (!(await driver.prepareTemplate(spec(randomUUID()), plugin))) {
        throw new Error('no template could be built (the log above says why)')
      }
      const secs = ((performance.now() - t0) / 1000).toFixed(1)
      console.error(`template ${template} built in ${secs} s`)
      let next = 0
      const first = (template - 1) * copies
      await Promise.all(
        Array.from({ length: parallel }, async () => {
          while (next < copies) await startOne(first + ++next)
        })
      )
    }
  } finally {
    await driver.sweep([])
    await runtime.shutdown()
    await provider.close()
    await rm(agentsDir, { recursive: true, force: true })
  }
  const total = templates * copies
  const counts = driver.templateCounts()
  console.log(
    `${framework}: ${total} template starts from ${templates} template(s), ${parallel} at a time: ${counts.restored} restored, ${failures.length} failed (${((100 * failures.length) / total).toFixed(1)}%); counts ${JSON.stringify(counts)}`
  )
}

await main()
