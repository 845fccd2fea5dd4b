/**
 * bench/wake: a sleeping agent's wake to its first container-served reply,
 * with CRIU checkpoints (the process driver's default where it can) side by
 * side with a cold boot (AGENT_CHECKPOINT=off), on real OpenClaw (or any
 * framework), the process driver and the real sandbox.
 *
 *   npm run bench:wake -- [--runs 5] [--framework openclaw] [--asleep-secs 5] [--no-turn] [--json]
 *
 * Each run boots a fresh agent to ready, chats once (its model provider is a
 * local streaming stand-in), puts it to sleep through the runtime (as the
 * idle timer and the capacity manager do), reads what it holds while asleep
 * (processes, resident memory, bytes on disk), then wakes it the way a
 * message does (start, readiness, one chat) and times that to the reply.
 * Runs of the modes alternate, so a busy moment of the machine hits them
 * alike. `--no-turn`: the agent sleeps without that first chat (as one whose
 * first message was answered on the hosted path while it booted), and a third
 * mode checkpoints without the runtime's warm-up turn, to show what it saves. Needs root, bubblewrap and CRIU 4.2+ (scripts/install-criu.sh) for
 * the checkpoint mode.
 */
import { randomUUID } from 'node:crypto'
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { loadPlugins } from '#plugins/plugin_loader'
import { PluginRegistry } from '#plugins/plugin_registry'
import { agentPaths } from '#runtime/agent_paths'
import { criu } from '#runtime/process/checkpoint'
import { ProcessDriver } from '#runtime/process/process_driver'
import { markedProcesses } from '#runtime/process/process_record'
import { RuntimeService } from '#runtime/runtime_service'
import { treeCpuSecs } from '../shared/process_tree.ts'
import { benchAgentSpec, ensureOpenClawPackage } from '../shared/agents.ts'
import { startFakeModelProvider } from '../../tests/helpers/fake_model_provider.ts'

const root = join(import.meta.dirname, '..', '..')
const { values } = parseArgs({
  options: {
    'runs': { type: 'string', default: '5' },
    'framework': { type: 'string', default: 'openclaw' },
    'asleep-secs': { type: 'string', default: '5' },
    'no-turn': { type: 'boolean', default: false },
    'json': { type: 'boolean', default: false },
  },
})
const runs = Math.max(1, Number(values.runs))
const framework = values.framework!
const asleepMs = Number(values['asleep-secs']) * 1000
const turnBeforeSleep = !values['no-turn']
const storage = process.env.STORAGE_DIR ?? join(root, 'storage')
const cacheDir = join(storage, 'runtime')

type Mode = 'cold boot' | 'checkpoint' | 'checkpoint, no warm-up'

interface Sample {
  mode: Mode
  run: number
  /** Time the sleep took (checkpoint written, or plain stop). */
  sleepSecs: number
  /** Resident memory of the agent's processes while asleep. */
  asleepRssMb: number
  /** Its checkpoint on disk while asleep. */
  asleepDiskMb: number
  /** Wake (start, readiness, one chat) to the container's reply. */
  wakeSecs: number
  /** CPU its processes used from wake to the reply. */
  wakeCpuSecs: number
  /** The cold boot of the same agent, at creation, to ready and a first reply. */
  coldSecs: number
}

const fmt = (value: number, digits = 1) => value.toFixed(digits)
const percentile = (numbers: number[], p: number) => {
  const sorted = [...numbers].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}
const median = (numbers: number[]) => {
  const sorted = [...numbers].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

function processRssMb(agentId: string): number {
  let bytes = 0
  for (const pid of markedProcesses(agentId)) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8')
      bytes += Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0) * 1024
    } catch {
      // Exited meanwhile.
    }
  }
  return bytes / 1024 / 1024
}

function folderMb(dir: string): number {
  if (!existsSync(dir)) return 0
  let bytes = 0
  for (const name of readdirSync(dir)) bytes += statSync(join(dir, name)).size
  return bytes / 1024 / 1024
}

async function main() {
  if (!criu().path) throw new Error(`no checkpoints here: ${criu().reason}`)
  const registry = new PluginRegistry([
    ...(await loadPlugins(join(root, 'plugins'))),
    ...(await loadPlugins(join(root, 'tests/fixtures/plugins'))),
  ])
  const provider = await startFakeModelProvider({ reply: 'Benchmark reply.' })
  const agentsDir = await mkdtemp(join(tmpdir(), 'agent-host-bench-wake-'))
  const make = (mode: Mode) => {
    const driver = new ProcessDriver({
      agentsDir,
      cacheDir,
      stopGraceMs: 15_000,
      checkpoints: mode !== 'cold boot',
    })
    const warmUpBeforeCheckpoint = mode !== 'checkpoint, no warm-up'
    return {
      mode,
      driver,
      runtime: new RuntimeService({
        driver,
        frameworks: registry,
        agentsDir,
        warmUpBeforeCheckpoint,
      }),
    }
  }
  const modes = (
    turnBeforeSleep
      ? (['cold boot', 'checkpoint'] as const)
      : (['cold boot', 'checkpoint', 'checkpoint, no warm-up'] as const)
  ).map(make)
  const samples: Sample[] = []
  const specFor = (agentId: string) => benchAgentSpec(agentId, framework, provider.baseUrl)
  try {
    if (framework === 'openclaw') {
      await ensureOpenClawPackage(cacheDir)
      // The shared compile cache is warmed by one untimed start, as the service does.
      const agentId = randomUUID()
      await modes[0].runtime.ensureStarted(specFor(agentId))
      await modes[0].runtime.waitUntilReady(agentId, { timeoutMs: 600_000 })
      await modes[0].runtime.remove(agentId)
    }
    for (let run = 1; run <= runs; run++) {
      for (const { mode, runtime } of modes) {
        const agentId = randomUUID()
        const spec = specFor(agentId)
        const reply = () =>
          runtime.chat(agentId, {
            conversationId: 'bench',
            messages: [{ role: 'user', content: 'hello' }],
          })
        const t0 = performance.now()
        await runtime.ensureStarted(spec)
        await runtime.waitUntilReady(agentId, { timeoutMs: 300_000 }).catch(async (error) => {
          console.error(await runtime.logs(agentId, { tail: 40 }))
          throw error
        })
        if (turnBeforeSleep) await reply()
        const coldSecs = (performance.now() - t0) / 1000

        const t1 = performance.now()
        await runtime.sleep(agentId)
        const sleepSecs = (performance.now() - t1) / 1000
        const asleepRssMb = processRssMb(agentId)
        const asleepDiskMb = folderMb(join(agentPaths(agentsDir, agentId).runtime, 'checkpoint'))

        // Asleep a while: timers and leases of a restored framework see the time that passed.
        await new Promise((resolve) => setTimeout(resolve, asleepMs))
        const t2 = performance.now()
        await runtime.ensureStarted(spec)
        await runtime.waitUntilReady(agentId, { timeoutMs: 300_000 })
        const answer = await reply()
        const wakeSecs = (performance.now() - t2) / 1000
        if (!answer.content) throw new Error('the woken agent gave an empty reply')
        const wakeCpuSecs = await treeCpuSecs(agentsDir, agentId)
        const log = await runtime.logs(agentId, { tail: 400 })
        for (const line of log.split('\n').filter((text) => /checkpoint/.test(text))) {
          console.error(`  ${line}`)
        }
        await runtime.remove(agentId)

        samples.push({
          mode,
          run,
          sleepSecs,
          asleepRssMb,
          asleepDiskMb,
          wakeSecs,
          wakeCpuSecs,
          coldSecs,
        })
        console.error(
          `${mode} run ${run}: cold ${fmt(coldSecs, 2)}s, sleep ${fmt(sleepSecs, 2)}s (RSS asleep ${fmt(asleepRssMb)} MB, disk ${fmt(asleepDiskMb)} MB), wake to reply ${fmt(wakeSecs, 2)}s (CPU ${fmt(wakeCpuSecs)}s)`
        )
      }
    }
  } finally {
    for (const { driver, runtime } of modes) {
      await driver.sweep([])
      await runtime.shutdown()
    }
    await provider.close()
    await rm(agentsDir, { recursive: true, force: true })
  }

  const rows = modes.map(({ mode }) => {
    const mine = samples.filter((sample) => sample.mode === mode)
    const pick = (key: keyof Sample) => mine.map((sample) => sample[key] as number)
    return {
      mode,
      runs: mine.length,
      wakeP50: median(pick('wakeSecs')),
      wakeP95: percentile(pick('wakeSecs'), 95),
      wakeCpu: median(pick('wakeCpuSecs')),
      coldP50: median(pick('coldSecs')),
      sleepP50: median(pick('sleepSecs')),
      asleepRssMb: Math.max(...pick('asleepRssMb')),
      asleepDiskMb: median(pick('asleepDiskMb')),
    }
  })
  const cold = rows.find((row) => row.mode === 'cold boot')!
  if (values.json) {
    console.log(
      JSON.stringify({ node: process.version, cpus: cpus().length, samples, rows }, null, 2)
    )
    return
  }
  console.log(
    `\nwake of a sleeping ${framework} agent to its first container-served reply (process driver, Node ${process.version}, ${cpus().length} CPUs)`
  )
  console.log(
    `${'wake by'.padEnd(22)} runs  wake p50 s  wake p95 s  vs cold boot  CPU to wake s  sleep s  RSS asleep MB  disk asleep MB  (create to ${turnBeforeSleep ? 'first reply' : 'ready'} p50 s)`
  )
  for (const row of rows) {
    console.log(
      [
        row.mode.padEnd(22),
        String(row.runs).padStart(4),
        fmt(row.wakeP50, 2).padStart(10),
        fmt(row.wakeP95, 2).padStart(11),
        `${fmt(row.wakeP50 / cold.wakeP50, 3)}x`.padStart(13),
        fmt(row.wakeCpu).padStart(14),
        fmt(row.sleepP50, 2).padStart(8),
        fmt(row.asleepRssMb).padStart(14),
        fmt(row.asleepDiskMb).padStart(15),
        `  (${fmt(row.coldP50, 2)})`,
      ].join(' ')
    )
  }
}

await main()
