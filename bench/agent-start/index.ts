/**
 * bench/agent-start: time from create to ready, and resident memory per
 * agent, on the process driver, for the test fixture framework, the real
 * OpenClaw and the real Hermes Agent (their model provider played by a local
 * streaming stand-in).
 *
 *   npm run bench:agent-start -- [--runs 3] [--frameworks fixture,openclaw,hermes]
 *                                [--compile-cache both|on|off] [--json]
 *
 * Each run creates a fresh agent (own folder, port, config), starts it,
 * polls its readiness path, reads its process tree's RSS from /proc, sends
 * one chat, reads RSS again, stops it, starts it again from its folders (what
 * a restart does; a sleeping agent's wake restores its checkpoint instead:
 * bench/wake) until ready, then stops and removes it. The OpenClaw package
 * and the Hermes venv are installed into the runtime cache first (not timed
 * as part of a start).
 *
 * OpenClaw runs with and without the shared warm compile cache
 * (plugins/openclaw/compile_cache.ts), runs of the two alternating so a busy
 * moment of the machine hits both alike (`--compile-cache on|off`: one of
 * them). The cache is warmed by one untimed start first, as the service does
 * once per framework version.
 */
import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { loadPlugins } from '#plugins/plugin_loader'
import { PluginRegistry } from '#plugins/plugin_registry'
import { PackageCache } from '#runtime/package_cache'
import { PythonPackageCache } from '#runtime/python_cache'
import { ProcessDriver } from '#runtime/process/process_driver'
import { RuntimeService } from '#runtime/runtime_service'
import { OPENCLAW_VERSION } from '../../plugins/openclaw/index.ts'
import { HERMES_PYPI_VERSION, HERMES_REQUIREMENTS } from '../../plugins/hermes/index.ts'
import { treeCpuSecs } from '../shared/process_tree.ts'
import { startFakeModelProvider } from '../../tests/helpers/fake_model_provider.ts'

const root = join(import.meta.dirname, '..', '..')
const { values } = parseArgs({
  options: {
    'runs': { type: 'string', default: '3' },
    'frameworks': { type: 'string', default: 'fixture,openclaw,hermes' },
    'compile-cache': { type: 'string', default: 'both' },
    'json': { type: 'boolean', default: false },
  },
})
const runs = Math.max(1, Number(values.runs))
const frameworks = values.frameworks!.split(',').map((name) => name.trim())
const storage = process.env.STORAGE_DIR ?? join(root, 'storage')
const cacheDir = join(storage, 'runtime')

interface Sample {
  /** The framework, and for OpenClaw whether the shared compile cache was on. */
  framework: string
  run: number
  readySecs: number
  rssReadyMb: number
  rssAfterChatMb: number
  firstChatSecs: number
  stopSecs: number
  wakeSecs: number
  /** CPU seconds its processes used until ready: less sensitive than wall time to a busy machine. */
  readyCpuSecs: number
  wakeCpuSecs: number
}

function stats(numbers: number[]) {
  const sorted = [...numbers].sort((a, b) => a - b)
  const median =
    sorted.length % 2
      ? sorted[(sorted.length - 1) / 2]
      : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2
  return { min: sorted[0], median, max: sorted.at(-1)! }
}

const fmt = (value: number, digits = 1) => value.toFixed(digits)

async function main() {
  const registry = new PluginRegistry([
    ...(await loadPlugins(join(root, 'plugins'))),
    ...(await loadPlugins(join(root, 'tests/fixtures/plugins'))),
  ])
  const provider = await startFakeModelProvider({ reply: 'Benchmark reply.' })
  const agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-bench-'))
  const make = (compileCache: boolean) => {
    const driver = new ProcessDriver({ agentsDir, cacheDir, stopGraceMs: 15_000, compileCache })
    return { driver, runtime: new RuntimeService({ driver, frameworks: registry, agentsDir }) }
  }
  const withCache = make(true)
  const withoutCache = make(false)
  const cacheModes = values['compile-cache'] === 'both' ? ['off', 'on'] : [values['compile-cache']!]
  /** What each framework runs as: OpenClaw once per compile cache mode. */
  const variants = frameworks.flatMap((framework) =>
    framework === 'openclaw'
      ? cacheModes.map((mode) => ({
          framework,
          label: `openclaw, shared cache ${mode}`,
          runtime: mode === 'on' ? withCache.runtime : withoutCache.runtime,
        }))
      : [{ framework, label: framework, runtime: withCache.runtime }]
  )
  const samples: Sample[] = []

  try {
    if (frameworks.includes('openclaw')) {
      const started = Date.now()
      await new PackageCache({
        cacheDir,
        log: (message) => console.error(`[cache] ${message}`),
      }).ensure('openclaw', OPENCLAW_VERSION)
      console.error(
        `[cache] openclaw@${OPENCLAW_VERSION} available after ${fmt((Date.now() - started) / 1000)}s`
      )
    }

    if (frameworks.includes('hermes')) {
      const started = Date.now()
      await new PythonPackageCache({
        cacheDir,
        log: (message) => console.error(`[cache] ${message}`),
      }).ensure(`hermes-agent@${HERMES_PYPI_VERSION}`, HERMES_REQUIREMENTS)
      console.error(
        `[cache] hermes-agent@${HERMES_PYPI_VERSION} available after ${fmt((Date.now() - started) / 1000)}s`
      )
    }

    const specFor = (agentId: string, framework: string) => ({
      agentId,
      framework,
      config: { personality: 'A benchmark agent.' },
      modelProxy: {
        baseUrl: provider.baseUrl,
        token: 'bench-proxy-token',
        model: 'stand-in-model',
      },
    })
    if (frameworks.includes('openclaw') && cacheModes.includes('on')) {
      // Once per framework version, as the service does: the first start warms the cache.
      const started = Date.now()
      const agentId = randomUUID()
      await withCache.runtime.ensureStarted(specFor(agentId, 'openclaw'))
      await withCache.runtime.waitUntilReady(agentId, { timeoutMs: 600_000 })
      await withCache.runtime.remove(agentId)
      console.error(
        `[cache] openclaw compile cache warm (untimed first start: ${fmt((Date.now() - started) / 1000)}s)`
      )
    }

    // Frameworks one after another; OpenClaw's two modes alternate run by run.
    const rounds = frameworks.flatMap((framework) =>
      Array.from({ length: runs }, (_, index) =>
        variants
          .filter((variant) => variant.framework === framework)
          .map((variant) => ({ ...variant, run: index + 1 }))
      ).flat()
    )
    for (const { framework, label, runtime, run } of rounds) {
      const agentId = randomUUID()
      const spec = specFor(agentId, framework)
      const t0 = performance.now()
      await runtime.ensureStarted(spec)
      await runtime.waitUntilReady(agentId, { timeoutMs: 300_000 })
      const readySecs = (performance.now() - t0) / 1000
      const readyCpuSecs = await treeCpuSecs(agentsDir, agentId)
      const ready = await runtime.monitoring(agentId)

      const t1 = performance.now()
      await runtime.chat(agentId, {
        conversationId: 'bench',
        messages: [{ role: 'user', content: 'hello' }],
      })
      const firstChatSecs = (performance.now() - t1) / 1000
      const afterChat = await runtime.monitoring(agentId)

      const t2 = performance.now()
      await runtime.stop(agentId)
      const stopSecs = (performance.now() - t2) / 1000

      const t3 = performance.now()
      await runtime.ensureStarted(spec)
      await runtime.waitUntilReady(agentId, { timeoutMs: 300_000 })
      const wakeSecs = (performance.now() - t3) / 1000
      const wakeCpuSecs = await treeCpuSecs(agentsDir, agentId)
      await runtime.stop(agentId)
      await runtime.remove(agentId)

      samples.push({
        framework: label,
        run,
        readySecs,
        rssReadyMb: ready.memoryMb,
        rssAfterChatMb: afterChat.memoryMb,
        firstChatSecs,
        stopSecs,
        wakeSecs,
        readyCpuSecs,
        wakeCpuSecs,
      })
      console.error(
        `${label} run ${run}: ready ${fmt(readySecs, 2)}s (CPU ${fmt(readyCpuSecs)}s), RSS ${fmt(ready.memoryMb)} MB (after a chat ${fmt(afterChat.memoryMb)} MB), first chat ${fmt(firstChatSecs, 2)}s, stop ${fmt(stopSecs, 2)}s, wake ${fmt(wakeSecs, 2)}s (CPU ${fmt(wakeCpuSecs)}s)`
      )
    }
  } finally {
    for (const { driver, runtime } of [withCache, withoutCache]) {
      await driver.sweep([])
      await runtime.shutdown()
    }
    await provider.close()
    await rm(agentsDir, { recursive: true, force: true })
  }

  const summary = variants.map(({ label }) => {
    const mine = samples.filter((sample) => sample.framework === label)
    return {
      framework: label,
      runs: mine.length,
      readySecs: stats(mine.map((sample) => sample.readySecs)),
      rssReadyMb: stats(mine.map((sample) => sample.rssReadyMb)),
      rssAfterChatMb: stats(mine.map((sample) => sample.rssAfterChatMb)),
      firstChatSecs: stats(mine.map((sample) => sample.firstChatSecs)),
      stopSecs: stats(mine.map((sample) => sample.stopSecs)),
      wakeSecs: stats(mine.map((sample) => sample.wakeSecs)),
      readyCpuSecs: stats(mine.map((sample) => sample.readyCpuSecs)),
      wakeCpuSecs: stats(mine.map((sample) => sample.wakeCpuSecs)),
    }
  })

  if (values.json) {
    console.log(
      JSON.stringify({ node: process.version, cpus: cpus().length, samples, summary }, null, 2)
    )
    return
  }
  console.log(
    `\nagent start on the process driver (Node ${process.version}, ${cpus().length} CPUs)`
  )
  console.log(
    `${'framework'.padEnd(26)} runs  create->ready s (min/med/max)  RSS ready MB (min/med/max)  RSS after chat MB  first chat s  stop s  wake s (min/med/max)  CPU s to ready / to wake (med)`
  )
  for (const row of summary) {
    console.log(
      [
        row.framework.padEnd(26),
        String(row.runs).padStart(4),
        `  ${fmt(row.readySecs.min)} / ${fmt(row.readySecs.median)} / ${fmt(row.readySecs.max)}`.padEnd(
          31
        ),
        `${fmt(row.rssReadyMb.min)} / ${fmt(row.rssReadyMb.median)} / ${fmt(row.rssReadyMb.max)}`.padEnd(
          28
        ),
        `${fmt(row.rssAfterChatMb.median)}`.padEnd(18),
        fmt(row.firstChatSecs.median, 2).padEnd(13),
        fmt(row.stopSecs.median, 2).padEnd(7),
        `${fmt(row.wakeSecs.min)} / ${fmt(row.wakeSecs.median)} / ${fmt(row.wakeSecs.max)}`.padEnd(
          21
        ),
        `${fmt(row.readyCpuSecs.median)} / ${fmt(row.wakeCpuSecs.median)}`,
      ].join(' ')
    )
  }
}

await main()
