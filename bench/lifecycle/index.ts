/**
 * bench/lifecycle: how fast start, stop, restart and status answer with the
 * boot queue full, side by side with the same calls on an idle queue, in
 * one run against the real server (process driver, fixture framework).
 *
 *   npm run bench:lifecycle -- [--agents 40] [--rounds 40] [--boot-ms 5000] [--boot-concurrency 2] [--json]
 *
 * It starts the server from source on a throwaway PostgreSQL (the test
 * helpers' startThrowawayPostgres and startServerProcess) with the test-only fixture framework
 * (NODE_ENV=test), whose agents answer their readiness path only `--boot-ms`
 * after they launch, so each boot holds its boot slot that long like a real
 * framework's. Baseline: one agent alone, each call `--rounds` times. Full
 * queue: `--agents` agents created at once (accounts of 10 agents each), then
 * the same calls `--rounds` times each on agents picked in turn while most
 * of them wait in the queue or boot. Prints p50 and p99 of each call in ms.
 */
import { parseArgs } from 'node:util'
import { waitFor } from '../../tests/helpers/processes.ts'
import { percentile, startBenchService } from '../shared/service.ts'

const { values } = parseArgs({
  options: {
    'agents': { type: 'string', default: '40' },
    'rounds': { type: 'string', default: '40' },
    'boot-ms': { type: 'string', default: '5000' },
    'boot-concurrency': { type: 'string', default: '2' },
    'json': { type: 'boolean', default: false },
  },
})
const agentCount = Math.max(1, Number(values.agents))
const rounds = Math.max(1, Number(values.rounds))
const bootMs = Number(values['boot-ms'])
const AGENTS_PER_ACCOUNT = 10

type Call = 'GET status' | 'POST stop' | 'POST start' | 'POST restart'
const CALLS: Call[] = ['GET status', 'POST stop', 'POST start', 'POST restart']

// The server on a PostgreSQL of its own; no app is booted in this process.
const service = await startBenchService('lifecycle', {
  AGENT_BOOT_CONCURRENCY: values['boot-concurrency']!,
  AGENT_IDLE_SLEEP_SECS: '3600',
})
const request = service.request
const account = service.account

async function createAgent(token: string, name: string): Promise<string> {
  const created = await request('/agents', {
    method: 'POST',
    token,
    json: { name, framework: 'fixture', config: { readyDelayMs: bootMs } },
  })
  if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created.body)}`)
  return created.body.data.id as string
}

/** One call, timed from request to the whole answer; the agent's container state before it. */
async function timed(call: Call, token: string, agentId: string): Promise<number> {
  const [method, action] = call.split(' ')
  const path = `/agents/${agentId}/${action}`
  const started = performance.now()
  const answer = await request(path, { method, token })
  const ms = performance.now() - started
  if (answer.status !== 200)
    throw new Error(`${call}: ${answer.status} ${JSON.stringify(answer.body)}`)
  return ms
}

async function measure(targets: Array<{ token: string; agentId: string }>) {
  const samples = new Map<Call, number[]>(CALLS.map((call) => [call, []]))
  const states = new Map<string, number>()
  for (let round = 0; round < rounds; round++) {
    const target = targets[round % targets.length]
    for (const call of CALLS) {
      const status = await request(`/agents/${target.agentId}/status`, { token: target.token })
      const container = String(status.body.data?.container)
      states.set(container, (states.get(container) ?? 0) + 1)
      samples.get(call)!.push(await timed(call, target.token, target.agentId))
    }
  }
  return { samples, states }
}

try {
  // Baseline: the queue is idle (one agent, boot slots free).
  const baseToken = await account()
  const baseAgent = await createAgent(baseToken, 'Baseline')
  const containerOf = async (token: string, agentId: string) => {
    const answer = await request(`/agents/${agentId}/status`, { token })
    return answer.body.data?.container
  }
  await waitFor(
    async () => ((await containerOf(baseToken, baseAgent)) === 'running' ? true : undefined),
    { timeoutMs: 60_000, what: 'the baseline agent to run' }
  )
  const idle = await measure([{ token: baseToken, agentId: baseAgent }])
  await request(`/agents/${baseAgent}/stop`, { method: 'POST', token: baseToken })

  // Full: every agent created at once; all but the boot slots' wait in the queue.
  const tokens: string[] = []
  for (let index = 0; index < Math.ceil(agentCount / AGENTS_PER_ACCOUNT); index++) {
    tokens.push(await account())
  }
  const targets = await Promise.all(
    Array.from({ length: agentCount }, async (_, index) => {
      const token = tokens[Math.floor(index / AGENTS_PER_ACCOUNT)]
      return { token, agentId: await createAgent(token, `Load ${index}`) }
    })
  )
  const firstContainer = await containerOf(targets[0].token, targets[0].agentId)
  const full = await measure(targets.slice().reverse())

  const rows = CALLS.map((call) => {
    const a = idle.samples.get(call)!
    const b = full.samples.get(call)!
    return {
      call,
      idleP50: percentile(a, 50),
      idleP99: percentile(a, 99),
      fullP50: percentile(b, 50),
      fullP99: percentile(b, 99),
      samples: b.length,
    }
  })
  if (values.json) {
    console.log(
      JSON.stringify({ agentCount, rounds, bootMs, rows, states: Object.fromEntries(full.states) })
    )
  } else {
    console.log(
      `\n${agentCount} fixture agents created at once, boot ${bootMs} ms each, AGENT_BOOT_CONCURRENCY=${values['boot-concurrency']}; ${rounds} rounds per call`
    )
    console.log(`first agent right after the creations: container ${firstContainer}`)
    console.log(
      `container states before the full-queue calls: ${[...full.states].map(([state, count]) => `${state} ${count}`).join(', ')}\n`
    )
    console.log(
      '| call | idle queue p50 ms | idle queue p99 ms | full queue p50 ms | full queue p99 ms |'
    )
    console.log('|---|---|---|---|---|')
    for (const row of rows) {
      console.log(
        `| ${row.call} | ${row.idleP50.toFixed(0)} | ${row.idleP99.toFixed(0)} | ${row.fullP50.toFixed(0)} | ${row.fullP99.toFixed(0)} |`
      )
    }
  }
} finally {
  await service.stop()
}
