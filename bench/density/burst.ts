/**
 * bench:density --burst (issue 31): `--agents` agents created at once
 * across `--accounts` accounts, each sent one message, on the real server
 * (process driver); meanwhile `--probes` unrelated accounts each create
 * their first agent and message it, spread over the burst by its progress.
 * Run twice in one go, with the fair boot queue and with
 * AGENT_BOOT_QUEUE=fifo (the earlier first-come order), and printed side
 * by side:
 * - time from the first create until every burst agent is container-served
 *   (its status says `running`, or `sleeping` after it ran);
 * - boots per minute over that time;
 * - template restores vs cold boots, from the agents' logs (`restored` /
 *   `started` lines of the runtime);
 * - CPU-seconds of each agent's process tree when it was first seen served;
 * - an unrelated account's first agent: create -> container-served, p50 / p95.
 * Before the clock starts, each order's fresh server serves one agent of
 * its own (`--warm`, the default): its framework's template is built and
 * its files are read once, as on a host already in service; `--no-warm`
 * leaves that build to the burst (the first agent waits for it).
 * The fixture framework (default) boots in `--boot-ms` (its readiness
 * answers that late; the boot slot is held as long), so the queue behaves
 * as with a real framework at a fraction of the CPU.
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { agentPaths } from '#runtime/agent_paths'
import { treeCpuSecs } from '../shared/process_tree.ts'
import {
  percentile,
  pool,
  signUp,
  startBenchServer,
  type Account,
  type BenchServer,
} from './harness.ts'

export interface BurstOptions {
  agents: number
  accounts: number
  framework: string
  probes: number
  bootMs: number
  bootConcurrency?: string
  concurrency: number
  bootMinutes: number
  /** The orders run, in this order (default fair then fifo; swapped to check the host's drift). */
  orders: Order[]
  /** One agent served before the burst, so its template is built (default true). */
  warm: boolean
  /**
   * Pause between two rounds of status reads of the burst's unserved agents (default 500 ms; each
   * round reads them all, 8 at a time). The probes are read every 250 ms whatever this is.
   */
  pollMs: number
}

/**
 * `fair-whole`: the fair queue with whole checkpoints (AGENT_CHECKPOINT_DELTA=off), the deltas'
 * baseline. `fair-parallel`: the fair queue putting two agents to sleep for room at once
 * (AGENT_ROOM_SLEEPS=2), against the default one at a time. `fair-stored`: the fair queue with a
 * sleep freeing its memory only once its checkpoint is stored (AGENT_SLEEP_PIPELINE=off), the
 * sleep pipeline's baseline. `fair-prepare-all`: the fair queue with every start preparing its
 * container at once (AGENT_PREPARES_AT_ONCE=0), the bounded preparations' baseline.
 * `fair-checkpoint-all`: the fair queue checkpointing every sleep, also of an agent still as its
 * template started it (AGENT_SLEEP_AS_NEW=off), the sleeps as new agents' baseline.
 */
export type Order =
  | 'fair'
  | 'fifo'
  | 'fair-whole'
  | 'fair-parallel'
  | 'fair-stored'
  | 'fair-prepare-all'
  | 'fair-checkpoint-all'

interface Tracked {
  id: string
  account: Account
  createdAt: number
  servedAt?: number
  cpuSecs?: number
  /** Highest queuePosition its status showed. */
  maxPosition: number
  /** When its status first showed each phase (ms after its create began). */
  phases: Map<string, number>
}

interface BurstResult {
  order: Order
  /** The warm-up agent's create -> served (undefined: no warm-up). */
  warmUpSecs?: number
  created: number
  served: number
  allServedSecs: number
  bootsPerMinute: number
  restored: number
  cold: number
  cpuPerAgent: number
  burstWaits: number[]
  probeWaits: number[]
  probePositions: number[]
  /** The slowest unrelated first agent's phases, as first seen (s after its create began). */
  slowestProbePhases: string
  fivexx: number
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The agent's container serves it: running, or asleep after it ran. */
async function observe(bench: BenchServer, agent: Tracked): Promise<void> {
  if (agent.servedAt) return
  const answer = await bench.call(`/agents/${agent.id}/status`, { token: agent.account.jwt })
  const data = answer.body?.data
  if (typeof data?.phase === 'string' && !agent.phases.has(data.phase)) {
    agent.phases.set(data.phase, Date.now() - agent.createdAt)
  }
  if (typeof data?.queuePosition === 'number') {
    agent.maxPosition = Math.max(agent.maxPosition, data.queuePosition)
  }
  if (data?.container === 'running' || data?.container === 'sleeping') {
    agent.servedAt = Date.now()
    agent.cpuSecs = await treeCpuSecs(join(bench.storage, 'agents'), agent.id)
  }
}

/** Watches the agent until its container serves it or `deadline` passes; true when served. */
async function untilServed(bench: BenchServer, agent: Tracked, deadline: number, pauseMs: number) {
  while (!agent.servedAt && Date.now() < deadline) {
    await observe(bench, agent)
    if (!agent.servedAt) await sleep(pauseMs)
  }
  return agent.servedAt !== undefined
}

/**
 * Launches of the agent's container, from its runtime log: restored (from a
 * checkpoint, or from its framework's template) vs booted cold.
 */
function launches(bench: BenchServer, agentId: string): { restored: number; cold: number } {
  const log = agentPaths(join(bench.storage, 'agents'), agentId).logFile
  const text = existsSync(log) ? readFileSync(log, 'utf8') : ''
  const started = [...text.matchAll(/^\[runtime [^\]]+\] started (.*)$/gm)].map((m) => m[1])
  const fromTemplate = started.filter((line) => line.includes(' from its template ')).length
  return {
    restored: [...text.matchAll(/^\[runtime [^\]]+\] restored /gm)].length + fromTemplate,
    cold: started.length - fromTemplate,
  }
}

/** The agent served last after its create (undefined: none). */
function slowest(agents: Tracked[]): Tracked | undefined {
  const wait = (agent: Tracked) => (agent.servedAt ?? Infinity) - agent.createdAt
  return [...agents].sort((a, b) => wait(b) - wait(a))[0]
}

/** "preparing 0.1, queued 8.2, ..." in the order its status showed them. */
function phasesOf(agent: Tracked | undefined): string {
  if (!agent) return '-'
  return [...agent.phases].map(([phase, ms]) => `${phase} ${(ms / 1000).toFixed(1)}`).join(', ')
}

async function createAndMessage(
  bench: BenchServer,
  account: Account,
  name: string,
  options: BurstOptions
): Promise<Tracked | undefined> {
  const createdAt = Date.now()
  const created = await bench.call('/agents', {
    method: 'POST',
    token: account.jwt,
    json: {
      name,
      framework: options.framework,
      ...(options.framework === 'fixture' ? { config: { readyDelayMs: options.bootMs } } : {}),
    },
  })
  if (created.status !== 201) {
    console.error(`[burst] create answered ${created.status}: ${JSON.stringify(created.body)}`)
    return undefined
  }
  const agent: Tracked = {
    id: created.body.data.id,
    account,
    createdAt,
    maxPosition: 0,
    phases: new Map(),
  }
  const chat = await bench.call(`/api/v1/agents/${agent.id}/chat`, {
    method: 'POST',
    token: account.key,
    json: { message: 'Hello, are you there?' },
  })
  if (chat.status !== 200) console.error(`[burst] chat answered ${chat.status}`)
  return agent
}

/**
 * One agent of an account of its own, served and then deleted: the
 * framework's template is built and its files are in the page cache, as
 * on a host that has served agents before. Seconds it took.
 */
async function warmUp(bench: BenchServer, account: Account, options: BurstOptions) {
  const started = Date.now()
  const agent = await createAndMessage(bench, account, 'Warm-up', options)
  if (!agent) throw new Error('the warm-up agent could not be created')
  if (!(await untilServed(bench, agent, started + options.bootMinutes * 60_000, 500))) {
    throw new Error('the warm-up agent was not served in time')
  }
  const removed = await bench.call(`/agents/${agent.id}`, {
    method: 'DELETE',
    token: account.jwt,
  })
  if (removed.status >= 300) throw new Error(`deleting the warm-up agent: ${removed.status}`)
  return (Date.now() - started) / 1000
}

async function burstRun(order: Order, options: BurstOptions): Promise<BurstResult> {
  console.error(`[burst] ${order}: starting the server`)
  const bench = await startBenchServer(options.framework, {
    AGENT_BOOT_QUEUE: order === 'fifo' ? 'fifo' : 'fair',
    AGENT_CHECKPOINT_DELTA: order === 'fair-whole' ? 'off' : 'on',
    ...(order === 'fair-parallel' ? { AGENT_ROOM_SLEEPS: '2' } : {}),
    ...(order === 'fair-stored' ? { AGENT_SLEEP_PIPELINE: 'off' } : {}),
    ...(order === 'fair-prepare-all' ? { AGENT_PREPARES_AT_ONCE: '0' } : {}),
    ...(order === 'fair-checkpoint-all' ? { AGENT_SLEEP_AS_NEW: 'off' } : {}),
    AGENT_BOOT_CONCURRENCY: options.bootConcurrency,
    // Nobody sleeps during the run: every launch is the agent's first.
    AGENT_IDLE_SLEEP_SECS: '86400',
  })
  try {
    const signUps = options.accounts + options.probes + (options.warm ? 1 : 0)
    console.error(`[burst] ${order}: signing up ${signUps} accounts`)
    const signedUp: Account[] = []
    await pool(
      Array.from({ length: signUps }, (_, i) => i),
      options.concurrency,
      async (i) => {
        signedUp[i] = await signUp(bench, i + 1)
      }
    )
    const accounts = signedUp.slice(0, options.accounts)
    const probeAccounts = signedUp.slice(options.accounts, options.accounts + options.probes)
    let warmUpSecs: number | undefined
    if (options.warm) {
      console.error(`[burst] ${order}: serving one agent first (its template is built)`)
      warmUpSecs = await warmUp(bench, signedUp[signUps - 1], options)
    }
    // Several agents per burst account (founding_member holds 10).
    await bench.query(`update users set tier = 'founding_member' where email = any($1)`, [
      accounts.map((account) => account.email),
    ])
    const plan = Array.from({ length: options.agents }, (_, i) => accounts[i % accounts.length])

    const burst: Tracked[] = []
    const probes: Tracked[] = []
    const started = Date.now()
    console.error(`[burst] ${order}: creating ${options.agents} agents`)
    let index = 0
    const creating = pool(plan, options.concurrency, async (account) => {
      const agent = await createAndMessage(bench, account, `Burst ${index++}`, options)
      if (agent) burst.push(agent)
    })

    // Probe i starts once i/(probes+1) of the burst is served: spread over it in both orders.
    // Each is watched on its own, so a slow one does not push the next past the burst.
    const probing = (async () => {
      const watching: Promise<boolean>[] = []
      for (let i = 0; i < probeAccounts.length; i++) {
        const due = Math.floor((i * options.agents) / (probeAccounts.length + 1))
        while (burst.filter((agent) => agent.servedAt).length < due) await sleep(200)
        const agent = await createAndMessage(bench, probeAccounts[i], `Probe ${i}`, options)
        if (!agent) continue
        probes.push(agent)
        watching.push(untilServed(bench, agent, started + options.bootMinutes * 60_000, 250))
      }
      await Promise.all(watching)
    })()

    const deadline = started + options.bootMinutes * 60_000
    let lastReport = 0
    await creating
    while (Date.now() < deadline) {
      await pool(
        burst.filter((agent) => !agent.servedAt),
        options.concurrency,
        (agent) => observe(bench, agent)
      )
      const served = burst.filter((agent) => agent.servedAt).length
      if (Date.now() - lastReport > 15_000) {
        lastReport = Date.now()
        console.error(
          `[burst] ${order}: ${served} of ${burst.length} served after ${Math.round((Date.now() - started) / 1000)} s`
        )
      }
      if (served === burst.length) break
      await sleep(options.pollMs)
    }
    await probing

    const served = burst.filter((agent) => agent.servedAt)
    const lastServed = Math.max(...served.map((agent) => agent.servedAt!))
    const allServedSecs =
      served.length === burst.length ? (lastServed - started) / 1000 : Number.NaN
    const everyone = [...burst, ...probes]
    const counts = everyone.map((agent) => launches(bench, agent.id))
    const cpu = everyone.flatMap((agent) =>
      agent.cpuSecs !== undefined && Number.isFinite(agent.cpuSecs) ? [agent.cpuSecs] : []
    )
    return {
      order,
      warmUpSecs,
      created: burst.length,
      served: served.length,
      allServedSecs,
      // Probes served within the burst's time took boots too.
      bootsPerMinute:
        (served.length + probes.filter((agent) => agent.servedAt! <= lastServed).length) /
        ((lastServed - started) / 60_000),
      restored: counts.reduce((sum, count) => sum + count.restored, 0),
      cold: counts.reduce((sum, count) => sum + count.cold, 0),
      cpuPerAgent: cpu.reduce((sum, secs) => sum + secs, 0) / Math.max(1, cpu.length),
      burstWaits: served.map((agent) => (agent.servedAt! - agent.createdAt) / 1000),
      // In order of arrival: the first probes arrive with the burst's first creates.
      probeWaits: probes
        .filter((agent) => agent.servedAt)
        .map((agent) => (agent.servedAt! - agent.createdAt) / 1000),
      probePositions: probes.map((agent) => agent.maxPosition),
      slowestProbePhases: phasesOf(slowest(probes)),
      fivexx: [...bench.statuses.entries()]
        .filter(([code]) => code >= 500)
        .reduce((sum, [, count]) => sum + count, 0),
    }
  } finally {
    await bench.stop()
  }
}

export async function runBurst(options: BurstOptions): Promise<void> {
  const results: BurstResult[] = []
  for (const order of options.orders) results.push(await burstRun(order, options))
  const secs = (value: number) => (Number.isFinite(value) ? `${value.toFixed(1)} s` : 'not all')
  const rows: Array<[string, (result: BurstResult) => string]> = [
    [
      'before the burst: one agent served (its template built)',
      (r) => (r.warmUpSecs === undefined ? 'no' : `in ${secs(r.warmUpSecs)}`),
    ],
    ['burst agents created / container-served', (r) => `${r.created} / ${r.served}`],
    ['time until every burst agent is container-served', (r) => secs(r.allServedSecs)],
    ['boots per minute (burst and probes)', (r) => r.bootsPerMinute.toFixed(1)],
    ['template restores / cold boots (all launches)', (r) => `${r.restored} / ${r.cold}`],
    ['CPU-seconds per started agent (its process tree)', (r) => r.cpuPerAgent.toFixed(2)],
    [
      'burst agent create -> served p50 / p95',
      (r) => `${secs(percentile(r.burstWaits, 50))} / ${secs(percentile(r.burstWaits, 95))}`,
    ],
    [
      "unrelated account's first agent: create -> served p50 / p95",
      (r) =>
        `${secs(percentile(r.probeWaits, 50))} / ${secs(percentile(r.probeWaits, 95))} (${r.probeWaits.length} probes)`,
    ],
    [
      "unrelated accounts' first agents, in order of arrival (s)",
      (r) => r.probeWaits.map((wait) => wait.toFixed(0)).join(', '),
    ],
    [
      "unrelated account's first agent: highest queuePosition seen, p50 / max",
      (r) => `${percentile(r.probePositions, 50)} / ${Math.max(0, ...r.probePositions)}`,
    ],
    [
      "the slowest unrelated first agent's phases, first seen (s after its create)",
      (r) => r.slowestProbePhases,
    ],
    ['5xx answers', (r) => String(r.fivexx)],
  ]
  console.log(
    `\n## bench:density --burst (${options.framework}${options.framework === 'fixture' ? `, boot ${options.bootMs} ms` : ''}, ` +
      `${options.agents} agents across ${options.accounts} accounts, ${options.probes} probe accounts, ` +
      `AGENT_BOOT_CONCURRENCY=${options.bootConcurrency ?? 'cores'}, process driver)\n`
  )
  console.log(`| figure | ${results.map((r) => r.order).join(' | ')} |`)
  console.log(`|---|${results.map(() => '---').join('|')}|`)
  for (const [label, value] of rows) {
    console.log(`| ${label} | ${results.map(value).join(' | ')} |`)
  }
}
