/**
 * bench/scale-out (a): two instances of the service on this host behind no
 * balancer, as a process manager's cluster mode runs them (the same
 * checkout, STORAGE_DIR, PostgreSQL and Redis; each its own port), and
 * chat requests alternating between them. One fixture agent runs, started
 * through instance A, which holds it (supervises its process tree); B
 * reaches the same process from the agent's record on the shared storage
 * (docs/runtime.md "Many machines").
 *
 *   npm run bench:scale-out -- [--requests 400] [--port 3404]
 *
 * Measured, request by request in alternating order (A, B, A, B ...), one
 * at a time: POST /api/v1/agents/:id/chat (API key, quota, chat service,
 * the agent's own framework) through A and through B, and the time to the
 * first token of POST /agents/:id/chat/stream through each, and GET
 * /agents/:id/status (which B asks of A over the peer link); the agent's
 * framework called directly (its address and gateway token) as the floor.
 * The table gives p50 and p99 and what B adds over A (the goal: under
 * 2 ms at p50). Not part of `npm test`.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { percentile, signUp, startBenchServer } from '../density/harness.ts'
import { startServerProcess, type ServerProcess } from '../../tests/helpers/processes.ts'
import { startThrowawayRedis } from '../../tests/helpers/throwaway_redis.ts'

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`)
  return index > 0 ? Number(process.argv[index + 1]) : fallback
}

const REQUESTS = option('requests', 400)
const PORT = option('port', Number(process.env.PORT ?? 3404))
const WARM_UP = 40

/** One request; its status, the time to its first body chunk matching `first`, and the body. */
async function timed(url: string, init: RequestInit, first?: RegExp) {
  const started = performance.now()
  const response = await fetch(url, init)
  let text = ''
  let firstMs = -1
  const decoder = new TextDecoder()
  for await (const chunk of response.body!) {
    text += decoder.decode(chunk, { stream: true })
    if (firstMs < 0 && (!first || first.test(text))) firstMs = performance.now() - started
  }
  return { status: response.status, firstMs, totalMs: performance.now() - started, text }
}

const redis = await startThrowawayRedis()
const a = await startBenchServer('fixture', {
  PORT: String(PORT),
  HOST: '127.0.0.1',
  REDIS_URL: redis.url,
  AGENT_PREPARE_FRAMEWORKS: 'off',
})
let b: ServerProcess | undefined
try {
  b = await startServerProcess({ ...a.env, PORT: String(PORT + 10) })
  for (let i = 0; ; i++) {
    const health = await fetch(`${b.url}/health`).catch(() => undefined)
    if (health?.status === 200) break
    if (i > 900) throw new Error(`the second instance did not start:\n${b.output()}`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }

  const account = await signUp(a, 0)
  await a.query(`update users set tier = 'business' where email = $1`, [account.email])
  const created = await a.call('/agents', {
    method: 'POST',
    token: account.jwt,
    json: { name: 'Scale-out agent', framework: 'fixture' },
  })
  if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created.body)}`)
  const agentId = created.body.data.id as string
  for (let i = 0; ; i++) {
    const status = await a.call(`/agents/${agentId}/status`, { token: account.jwt })
    if (status.body.data?.container === 'running') break
    if (i > 600) throw new Error(`the agent did not run: ${JSON.stringify(status.body)}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const runtimeDir = join(a.storage, 'agents', '.runtime', agentId)
  const record = JSON.parse(readFileSync(join(runtimeDir, 'process.json'), 'utf8'))
  const gatewayToken = JSON.parse(readFileSync(join(runtimeDir, 'credentials.json'), 'utf8'))
  const direct = `http://${record.host ?? '127.0.0.1'}:${record.port}/v1/chat/completions`

  const instances = { A: a.server.url, B: b.url }
  const chat = (base: string) =>
    timed(`${base}/api/v1/agents/${agentId}/chat`, {
      method: 'POST',
      headers: { 'authorization': `Bearer ${account.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'ping' }),
    })
  const stream = (base: string) =>
    timed(
      `${base}/agents/${agentId}/chat/stream`,
      {
        method: 'POST',
        headers: { 'authorization': `Bearer ${account.jwt}`, 'content-type': 'application/json' },
        body: JSON.stringify({ message: 'ping' }),
      },
      /"token"/
    )
  // Asked of the holder over the peer link when it reaches B (the one routed read).
  const status = (base: string) =>
    timed(`${base}/agents/${agentId}/status`, {
      headers: { authorization: `Bearer ${account.jwt}` },
    })
  const agentItself = () =>
    timed(direct, {
      method: 'POST',
      headers: {
        'authorization': `Bearer ${gatewayToken.gatewayToken}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ model: 'fixture', messages: [{ role: 'user', content: 'ping' }] }),
    })

  const samples = new Map<string, number[]>()
  const note = (name: string, ms: number) => samples.set(name, [...(samples.get(name) ?? []), ms])
  for (let i = 0; i < WARM_UP + REQUESTS; i++) {
    const [first, second] = i % 2 === 0 ? (['A', 'B'] as const) : (['B', 'A'] as const)
    for (const name of [first, second]) {
      const whole = await chat(instances[name])
      if (whole.status !== 200 || !whole.text.includes('ping')) {
        throw new Error(`chat through ${name}: ${whole.status} ${whole.text.slice(0, 300)}`)
      }
      const streamed = await stream(instances[name])
      const seen = await status(instances[name])
      if (i >= WARM_UP) {
        note(`chat ${name}`, whole.totalMs)
        note(`stream ${name}`, streamed.firstMs)
        note(`status ${name}`, seen.totalMs)
      }
    }
    const floor = await agentItself()
    if (i >= WARM_UP) note('direct', floor.totalMs)
  }

  const ms = (value: number) => value.toFixed(2)
  const row = (label: string, name: string, against?: string) => {
    const values = samples.get(name)!
    const p50 = percentile(values, 50)
    const p99 = percentile(values, 99)
    const added = against
      ? `${ms(p50 - percentile(samples.get(against)!, 50))} | ${ms(p99 - percentile(samples.get(against)!, 99))}`
      : '- | -'
    console.log(`| ${label} | ${values.length} | ${ms(p50)} | ${ms(p99)} | ${added} |`)
  }
  console.log(
    `\nbench:scale-out: 2 instances on one host (shared STORAGE_DIR, PostgreSQL, Redis), ${REQUESTS} requests each, alternating; agent held by A\n`
  )
  console.log('| path | requests | p50 ms | p99 ms | added p50 ms | added p99 ms |')
  console.log('|---|---|---|---|---|---|')
  row('chat (whole reply) through A, the holder', 'chat A')
  row('chat (whole reply) through B, the other instance', 'chat B', 'chat A')
  row('stream, first token, through A', 'stream A')
  row('stream, first token, through B', 'stream B', 'stream A')
  row('status through A', 'status A')
  row('status through B (asked of A over the peer link)', 'status B', 'status A')
  row("the agent's framework called directly (floor)", 'direct')
} finally {
  await b?.stop()
  await a.stop()
  await redis.destroy()
}
