/**
 * bench/density: how many agents one host holds, through the whole service.
 *
 *   npm run bench:density -- [--agents 200] [--framework openclaw|fixture]
 *                            [--sample 10] [--idle-secs 30] [--concurrency 8]
 *                            [--boot-minutes <max(60, agents / 2)>]
 *
 * Starts the real server (bin/server.ts) on a PostgreSQL of its own, with
 * the process driver and its defaults except AGENT_IDLE_SLEEP_SECS. Then:
 * 1. idle host: p50/p99 of GET /api/v1/me and GET /agents;
 * 2. creates `--agents` agents across free-tier accounts as fast as the API
 *    takes them and chats once with each, while sampling the same two
 *    routes and the host's used memory;
 * 3. waits until every agent has booted (cold boot: create -> container
 *    `running`) and a sample of them has gone to sleep;
 * 4. chats with a random sample again and measures wake: first message ->
 *    first reply served by the agent's own container (restored from its
 *    checkpoint where the host has CRIU, else booted).
 * Prints one table. Not part of npm test.
 *
 *   npm run bench:density -- --burst [--agents 200] [--accounts 50] [--probes 10]
 *                            [--framework fixture|openclaw] [--boot-ms 3000]
 *                            [--boot-concurrency <cores>] [--orders fair,fifo,fair-whole,fair-parallel,fair-stored,fair-prepare-all,fair-checkpoint-all]
 *                            [--poll-ms 500]
 *                            [--no-warm]
 *
 * Burst mode (bench/density/burst.ts): every agent created at once, each
 * sent one message, with the fair boot queue and the FIFO baseline side by
 * side (issue 31).
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { agentPaths } from '#runtime/agent_paths'
import { agentProcessIds } from '../../tests/helpers/agent_processes.ts'
import {
  percentile,
  pool,
  signUp,
  startBenchServer,
  type Account,
  type BenchServer,
} from './harness.ts'
import { runBurst, type Order } from './burst.ts'

const { values } = parseArgs({
  options: {
    'agents': { type: 'string', default: '200' },
    'framework': { type: 'string', default: 'openclaw' },
    'sample': { type: 'string', default: '10' },
    'idle-secs': { type: 'string', default: '30' },
    'concurrency': { type: 'string', default: '8' },
    'boot-minutes': { type: 'string' },
    // Burst mode (bench/density/burst.ts).
    'burst': { type: 'boolean', default: false },
    'accounts': { type: 'string' },
    'probes': { type: 'string' },
    'boot-ms': { type: 'string' },
    'boot-concurrency': { type: 'string' },
    'orders': { type: 'string', default: 'fair,fifo' },
    'warm': { type: 'boolean', default: true },
    'poll-ms': { type: 'string', default: '500' },
  },
  allowNegative: true,
})
if (values.burst) {
  await runBurst({
    agents: Number(values.agents),
    accounts: Number(values.accounts ?? 50),
    framework: process.argv.includes('--framework') ? values.framework! : 'fixture',
    probes: Number(values.probes ?? 10),
    bootMs: Number(values['boot-ms'] ?? 3000),
    bootConcurrency: values['boot-concurrency'],
    concurrency: Number(values.concurrency),
    bootMinutes: Number(values['boot-minutes'] ?? 60),
    orders: values
      .orders!.split(',')
      .filter((order): order is Order =>
        /^(fair|fifo|fair-whole|fair-parallel|fair-stored|fair-prepare-all|fair-checkpoint-all)$/.test(
          order
        )
      ),
    warm: values.warm!,
    pollMs: Number(values['poll-ms']),
  })
  process.exit(0)
}
const AGENTS = Number(values.agents)
const FRAMEWORK = values.framework!
const SAMPLE = Math.min(AGENTS, Number(values.sample))
const IDLE_SECS = Number(values['idle-secs'])
const CONCURRENCY = Number(values.concurrency)
/** How long every agent gets to boot once: boots queue two at a time here, so it grows with the run. */
const BOOT_MINUTES = Number(values['boot-minutes'] ?? Math.max(60, AGENTS / 2))

interface AgentRun {
  id: string
  account: Account
  createdAt: number
  runningAt?: number
}

let bench: BenchServer
const call: BenchServer['call'] = (path, init) => bench.call(path, init)

function usedMemoryMb(): number {
  const info = readFileSync('/proc/meminfo', 'utf8')
  const field = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(info)![1]) / 1024
  return field('MemTotal') - field('MemAvailable')
}

/** Resident memory of the agent's processes. */
function agentRssMb(agentId: string): number {
  let kb = 0
  for (const pid of agentProcessIds(agentId)) {
    try {
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0)
    } catch {}
  }
  return kb / 1024
}

/** Latencies of the two probe routes, sampled until `until` resolves. */
async function sampleApi(
  account: Account,
  until: Promise<unknown>,
  samples: { me: number[]; list: number[] }
) {
  let done = false
  until.finally(() => (done = true))
  while (!done) {
    for (const [route, token, into] of [
      ['/api/v1/me', account.key, samples.me],
      ['/agents', account.jwt, samples.list],
    ] as const) {
      const started = performance.now()
      await call(route, { token })
      into.push(performance.now() - started)
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

async function containerOf(agent: AgentRun): Promise<string> {
  const answer = await call(`/agents/${agent.id}/status`, { token: agent.account.jwt })
  return answer.body?.data?.container ?? 'unknown'
}

async function main() {
  bench = await startBenchServer(FRAMEWORK, { AGENT_IDLE_SLEEP_SECS: String(IDLE_SECS) })
  const storage = bench.storage
  // The runtime's files of an agent (its log, its checkpoint) are under `<agents>/.runtime/<id>`.
  const pathsOf = (agentId: string) => agentPaths(join(storage, 'agents'), agentId)
  const memoryBefore = usedMemoryMb()
  let peakMemory = memoryBefore
  const memoryTimer = setInterval(() => (peakMemory = Math.max(peakMemory, usedMemoryMb())), 500)

  try {
    const probe = await signUp(bench, 0)
    const idle = { me: [] as number[], list: [] as number[] }
    await sampleApi(probe, new Promise((resolve) => setTimeout(resolve, 5_000)), idle)

    console.error(`[density] signing up ${AGENTS} accounts`)
    const accounts: Account[] = []
    await pool(
      Array.from({ length: AGENTS }, (_, i) => i + 1),
      CONCURRENCY,
      async (i) => {
        accounts.push(await signUp(bench, i))
      }
    )

    const busy = { me: [] as number[], list: [] as number[] }
    const agents: AgentRun[] = []
    let answered = 0
    const started = Date.now()
    const creating = pool(accounts, CONCURRENCY, async (account) => {
      const created = await call('/agents', {
        method: 'POST',
        token: account.jwt,
        json: { name: 'Density agent', framework: FRAMEWORK },
      })
      if (created.status !== 201) {
        console.error(
          `[density] create answered ${created.status}: ${JSON.stringify(created.body)}`
        )
        return
      }
      const agent: AgentRun = { id: created.body.data.id, account, createdAt: Date.now() }
      agents.push(agent)
      const chat = await call(`/api/v1/agents/${agent.id}/chat`, {
        method: 'POST',
        token: account.key,
        json: { message: 'Hello, are you there?' },
      })
      if (chat.status === 200) answered++
    })
    // Until every agent has booted once (or --boot-minutes).
    const booted = creating.then(async () => {
      const deadline = Date.now() + BOOT_MINUTES * 60_000
      while (Date.now() < deadline && agents.some((agent) => !agent.runningAt)) {
        await pool(
          agents.filter((agent) => !agent.runningAt),
          CONCURRENCY,
          async (agent) => {
            const container = await containerOf(agent)
            // An agent already put to sleep for room had booted.
            if (container === 'running' || container === 'sleeping') agent.runningAt ??= Date.now()
          }
        )
        await new Promise((resolve) => setTimeout(resolve, 1_000))
      }
    })
    await sampleApi(probe, booted, busy)
    const bootMinutes = (Date.now() - started) / 60_000
    const coldBoots = agents
      .filter((a) => a.runningAt)
      .map((a) => (a.runningAt! - a.createdAt) / 1000)

    console.error(`[density] waiting for a sample of ${SAMPLE} to sleep`)
    // A random sample, as the issue asks (the first created slept first, and their
    // checkpoints are the first to make room for newer ones).
    const sample = agents
      .map((agent) => ({ agent, order: Math.random() }))
      .sort((a, b) => a.order - b.order)
      .slice(0, SAMPLE)
      .map(({ agent }) => agent)
    const sleepDeadline = Date.now() + (IDLE_SECS + 120) * 1000
    while (Date.now() < sleepDeadline) {
      const states = await Promise.all(sample.map(containerOf))
      if (states.every((state) => state === 'sleeping')) break
      await new Promise((resolve) => setTimeout(resolve, 2_000))
    }
    const sleepingRss = sample.map((agent) => agentRssMb(agent.id))
    const checkpoints = agents
      .map((agent) => join(pathsOf(agent.id).checkpoint, 'checkpoint.json'))
      .filter((file) => existsSync(file))
      .map((file) => JSON.parse(readFileSync(file, 'utf8')).bytes as number)

    const wakes: number[] = []
    const wakeStarts = new Map<string, number>()
    await pool(sample, 2, async (agent) => {
      const first = Date.now()
      wakeStarts.set(agent.id, first)
      for (let i = 0; i < 600; i++) {
        const chat = await call(`/api/v1/agents/${agent.id}/chat`, {
          method: 'POST',
          token: agent.account.key,
          json: { message: 'Wake up, please.' },
        })
        if (chat.status === 200 && chat.body.data.model !== 'local-dev') {
          wakes.push((Date.now() - first) / 1000)
          if (process.env.DENSITY_WAKE_LOGS) {
            console.error(
              `[density] ${agent.id}: woke ${new Date(first).toISOString()} -> reply ${new Date().toISOString()}`
            )
          }
          return
        }
        await new Promise((resolve) => setTimeout(resolve, 250))
      }
    })

    const fivexx = [...bench.statuses.entries()]
      .filter(([code]) => code >= 500)
      .reduce((n, [, c]) => n + c, 0)
    const row = (label: string, value: string) => console.log(`| ${label} | ${value} |`)
    const ms = (value: number) => `${value.toFixed(1)} ms`
    console.log(`\n## bench:density (${FRAMEWORK}, ${AGENTS} agents, process driver)\n`)
    console.log('| figure | value |')
    console.log('|---|---|')
    row('agents created / answered', `${agents.length} / ${answered} of ${AGENTS}`)
    row('5xx answers (whole run)', String(fivexx))
    row(
      'GET /api/v1/me p50 / p99, idle host',
      `${ms(percentile(idle.me, 50))} / ${ms(percentile(idle.me, 99))}`
    )
    row(
      'GET /api/v1/me p50 / p99, during the run',
      `${ms(percentile(busy.me, 50))} / ${ms(percentile(busy.me, 99))}`
    )
    row(
      'GET /agents p50 / p99, idle host',
      `${ms(percentile(idle.list, 50))} / ${ms(percentile(idle.list, 99))}`
    )
    row(
      'GET /agents p50 / p99, during the run',
      `${ms(percentile(busy.list, 50))} / ${ms(percentile(busy.list, 99))}`
    )
    row(
      'host memory used: before / peak',
      `${memoryBefore.toFixed(0)} MB / ${peakMemory.toFixed(0)} MB`
    )
    row(
      'memory per sleeping agent (RSS of its processes)',
      `${(sleepingRss.reduce((a, b) => a + b, 0) / Math.max(1, sleepingRss.length)).toFixed(1)} MB`
    )
    row(
      'cold boot (create -> running) p50 / p95',
      `${percentile(coldBoots, 50).toFixed(1)} s / ${percentile(coldBoots, 95).toFixed(1)} s`
    )
    row(
      'wake (message -> first container reply) p50 / p95',
      `${percentile(wakes, 50).toFixed(1)} s / ${percentile(wakes, 95).toFixed(1)} s (${wakes.length} of ${sample.length})`
    )
    if (process.env.DENSITY_WAKE_LOGS) {
      for (const agent of sample) {
        const log = pathsOf(agent.id).logFile
        const lines = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []
        console.error(`[density] ${agent.id}:\n  ${lines.slice(-8).join('\n  ')}`)
      }
    }
    // Message -> its container running again (restored, or booted), from the agent's log.
    const running = sample.flatMap((agent) => {
      const log = pathsOf(agent.id).logFile
      const text = existsSync(log) ? readFileSync(log, 'utf8') : ''
      const woke = wakeStarts.get(agent.id) ?? 0
      const at = [...text.matchAll(/^\[runtime ([^\]]+)\] (restored|started) /gm)]
        .map((match) => ({ at: Date.parse(match[1]), restored: match[2] === 'restored' }))
        .find((entry) => entry.at >= woke)
      return at ? [{ secs: (at.at - woke) / 1000, restored: at.restored }] : []
    })
    const restored = running.filter((entry) => entry.restored).length
    row(
      'sampled agents whose wake restored a checkpoint (the rest booted)',
      `${restored} of ${running.length} that ran again`
    )
    row(
      'wake (message -> container running again) p50 / p95',
      `${percentile(
        running.map((entry) => entry.secs),
        50
      ).toFixed(1)} s / ${percentile(
        running.map((entry) => entry.secs),
        95
      ).toFixed(1)} s`
    )
    row(
      'checkpoints on disk when the sample slept',
      `${checkpoints.length} agents, ${(checkpoints.reduce((a, b) => a + b, 0) / 1024 ** 3).toFixed(1)} GB`
    )
    row('wake p50 / cold boot p50', (percentile(wakes, 50) / percentile(coldBoots, 50)).toFixed(2))
    row('boot throughput', `${(coldBoots.length / bootMinutes).toFixed(1)} agents/min`)
  } finally {
    clearInterval(memoryTimer)
    await bench.stop()
  }
}

await main()
