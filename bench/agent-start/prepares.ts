/**
 * bench/agent-start/prepares.ts: another account's first start arriving
 * just after a burst of starts of 25 accounts: how long it sits in
 * `preparing` (the driver's create: rendered files, network namespace,
 * cgroups) with every start preparing at once, against AgentStarts' bound
 * and fair order (AGENT_PREPARES_AT_ONCE, default 8), side by side on the
 * process driver with real OpenClaw agents. Nothing boots: the boot
 * queue admits all and the start itself is left out (what follows the
 * preparation is not measured here; bench:density --burst measures it all).
 *
 *   npm run bench:prepares -- [--burst 100] [--rounds 2]
 */
import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { loadPlugins } from '#plugins/plugin_loader'
import { PluginRegistry } from '#plugins/plugin_registry'
import { AgentStarts } from '#runtime/agent_starts'
import { CapacityManager } from '#runtime/capacity/capacity_manager'
import { ProcessDriver } from '#runtime/process/process_driver'
import { RunPlans } from '#runtime/run_plans'
import type { ContainerDriver, ContainerInfo } from '#runtime/types'
import { benchAgentSpec, ensureOpenClawPackage } from '../shared/agents.ts'

const root = join(import.meta.dirname, '..', '..')
const { values } = parseArgs({
  options: { burst: { type: 'string', default: '100' }, rounds: { type: 'string', default: '2' } },
})
const burst = Math.max(1, Number(values.burst))
const rounds = Math.max(1, Number(values.rounds))
const cacheDir = join(process.env.STORAGE_DIR ?? join(root, 'storage'), 'runtime')

const registry = new PluginRegistry([...(await loadPlugins(join(root, 'plugins')))])
const plugin = registry.framework('openclaw')
await ensureOpenClawPackage(cacheDir)

/** Seconds until the start arriving after `burst` others is prepared, and until all are. */
async function round(atOnce: number): Promise<{ last: number; all: number }> {
  const agentsDir = await mkdtemp(join(tmpdir(), 'bench-prepares-'))
  const driver = new ProcessDriver({ agentsDir, cacheDir, stopGraceMs: 5000 })
  await driver.prepareFrameworks([plugin])
  const starts = new AgentStarts({
    // The start after the preparation is left out: nothing boots.
    driver: {
      resumes: () => false,
      start: async () => ({ state: 'stopped' }) as unknown as ContainerInfo,
    } as unknown as ContainerDriver,
    frameworks: registry,
    capacity: new CapacityManager({
      bootConcurrency: Number.POSITIVE_INFINITY,
      memoryBudgetMb: Number.POSITIVE_INFINITY,
      sleep: async () => {},
    }),
    plans: new RunPlans(),
    isReady: () => true,
    create: (spec) =>
      driver.create({ spec, plugin, gatewayToken: randomUUID(), containerId: randomUUID() }),
    waitUntilReady: async () => {},
    preparesAtOnce: atOnce,
  })
  const start = (ownerId: string) =>
    starts.startOrAdopt({
      ...benchAgentSpec(randomUUID(), 'openclaw', 'http://127.0.0.1:9'),
      ownerId,
    })
  const began = performance.now()
  const everyone = Array.from({ length: burst }, (_, i) => start(`burst-account-${i % 25}`))
  const late = performance.now()
  await start('another-account')
  const last = (performance.now() - late) / 1000
  await Promise.all(everyone)
  const all = (performance.now() - began) / 1000
  await driver.sweep([])
  await rm(agentsDir, { recursive: true, force: true })
  return { last, all }
}

const results = new Map<string, Array<{ last: number; all: number }>>()
const orders: Array<[string, number]> = [
  ['all at once (0)', 0],
  ['8 at once (default)', 8],
]
for (let r = 0; r < rounds; r++) {
  for (const [label, atOnce] of orders) {
    const result = await round(atOnce)
    console.error(
      `round ${r + 1}, ${label}: ${result.last.toFixed(2)} s / ${result.all.toFixed(2)} s`
    )
    results.set(label, [...(results.get(label) ?? []), result])
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const baseline = median(results.get(orders[0][0])!.map((r) => r.last))
console.log(`\n## bench:prepares (openclaw, ${burst} starts then one more, ${rounds} rounds)\n`)
console.log(
  "| preparations | another account's start after the burst: prepared in (median) | vs all at once | the whole burst prepared in (median) |"
)
console.log('|---|---|---|---|')
for (const [label] of orders) {
  const runs = results.get(label)!
  const last = median(runs.map((r) => r.last))
  console.log(
    `| ${label} | ${last.toFixed(2)} s | ${(last / baseline).toFixed(3)}x | ${median(runs.map((r) => r.all)).toFixed(2)} s |`
  )
}
process.exit(0)
