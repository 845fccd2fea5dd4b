/**
 * bench/chat-overhead: what the service adds on top of the model upstream,
 * in one run against the same local OpenAI-compatible stand-in.
 *
 *   DATABASE_URL=postgres://... npm run bench:chat-overhead -- \
 *     [--requests 400] [--sockets 5000] [--port $PORT or 4108] [--baseline <checkout>]
 *
 * - latency of one hosted chat (p50, p99): POST /api/v1/agents/:id/chat (API
 *   key, quota, chat service, credit hold and settlement, storage) and
 *   POST /v1/chat/completions (the model proxy), each against calling the
 *   stand-in's /v1/chat/completions directly with the same body;
 * - time to the first streamed token: POST /agents/:id/chat/stream (SSE) and
 *   the streaming proxy, against the stand-in's own stream;
 * - resident memory of the server process with 5,000 idle WebSocket
 *   connections on /agents/:id/ws, against before they connected.
 *
 * Requests run one at a time (latency, not throughput), service and direct
 * interleaved so drift on the shared machine hits both alike.
 *
 * `--baseline <checkout>`: another checkout of the service (for example
 * `git worktree add /tmp/base <commit>`, with its node_modules) is started
 * too, on the next port against the same database, and the hosted chat is
 * then timed on both, request by request in alternating order: on a loaded
 * machine, where two runs minutes apart differ by a factor of two, this
 * A/B pairing is what tells a change's effect. The server is
 * started from source (bin/server.ts) with MODEL_API_URL pointing at the
 * stand-in, its own STORAGE_DIR and LOG_LEVEL=warn. Setup writes the
 * account's tier and balance and the agent row (with a proxy token of the
 * bench's choosing) straight into the database, so no container starts.
 */
import { spawn, spawnSync } from 'node:child_process'
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import WebSocket from 'ws'

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`)
  return index > 0 ? Number(process.argv[index + 1]) : fallback
}

function textOption(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`)
  return index > 0 ? process.argv[index + 1] : undefined
}

const REQUESTS = option('requests', 400)
const SOCKETS = option('sockets', 5000)
const PORT = option('port', Number(process.env.PORT ?? 4108))
const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BASE = `http://127.0.0.1:${PORT}`
const BASELINE = textOption('baseline')
const BASELINE_BASE = `http://127.0.0.1:${PORT + 1}`
const REPLY = 'This is the benchmark reply, a dozen words long, streamed word by word.'

/**
 * 5,000 sockets need more than the usual 1,024 open files (client and
 * server each hold one per socket): re-run under a shell that raises the
 * soft limit when it is too low (the server inherits it).
 */
function openFilesLimit(): number {
  const limits = readFileSync('/proc/self/limits', 'utf8')
  const match = /Max open files\s+(\d+|unlimited)/.exec(limits)
  return !match || match[1] === 'unlimited' ? Infinity : Number(match[1])
}
const neededFiles = SOCKETS + 1024
if (openFilesLimit() < neededFiles && !process.env.CHAT_BENCH_REEXEC) {
  const command = [process.execPath, ...process.execArgv, ...process.argv.slice(1)]
    .map((part) => `'${part.replace(/'/g, `'\\''`)}'`)
    .join(' ')
  const result = spawnSync(
    '/bin/sh',
    ['-c', `ulimit -n ${neededFiles} 2>/dev/null || ulimit -n hard; exec ${command}`],
    {
      stdio: 'inherit',
      env: { ...process.env, CHAT_BENCH_REEXEC: '1' },
    }
  )
  process.exit(result.status ?? 1)
}
if (openFilesLimit() < neededFiles) {
  console.error(
    `Open files limit ${openFilesLimit()} is below ${neededFiles}: fewer sockets may open.`
  )
}

if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL (a PostgreSQL database the server may migrate).')
  process.exit(1)
}

// ---------------------------------------------------------------- stand-in
function startUpstream(): Promise<{ url: string; close: () => void }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}')
      const usage = { prompt_tokens: 24, completion_tokens: 14, total_tokens: 38 }
      const base = { id: 'chatcmpl-bench', created: 0, model: body.model ?? 'bench-model' }
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(
          JSON.stringify({
            ...base,
            object: 'chat.completion',
            choices: [
              { index: 0, message: { role: 'assistant', content: REPLY }, finish_reason: 'stop' },
            ],
            usage,
          })
        )
        return
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      const send = (payload: unknown) => res.write(`data: ${JSON.stringify(payload)}\n\n`)
      for (const piece of REPLY.split(/(?<= )/)) {
        send({
          ...base,
          object: 'chat.completion.chunk',
          choices: [{ index: 0, delta: { content: piece }, finish_reason: null }],
        })
      }
      send({
        ...base,
        object: 'chat.completion.chunk',
        choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
      })
      if (body.stream_options?.include_usage) {
        send({ ...base, object: 'chat.completion.chunk', choices: [], usage })
      }
      res.end('data: [DONE]\n\n')
    })
  })
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
        close: () => {
          server.closeAllConnections()
          server.close()
        },
      })
    )
  )
}

// ---------------------------------------------------------------- client
const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 4 })

/** One request; resolves with the status, the time to the first body byte matching `first`, and the total time. */
function timed(
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: unknown,
  first?: RegExp
): Promise<{ status: number; firstMs: number; totalMs: number; text: string }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const t0 = performance.now()
    let firstMs = -1
    const req = http.request(
      url,
      {
        method,
        agent: keepAlive,
        headers: payload ? { ...headers, 'content-type': 'application/json' } : headers,
      },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          text += chunk
          if (firstMs < 0 && (!first || first.test(text))) firstMs = performance.now() - t0
        })
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, firstMs, totalMs: performance.now() - t0, text })
        )
      }
    )
    req.on('error', reject)
    req.end(payload)
  })
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]
}

interface Pair {
  name: string
  service: number[]
  direct: number[]
}

function report(pair: Pair) {
  const p50s = percentile(pair.service, 0.5)
  const p50d = percentile(pair.direct, 0.5)
  const p99s = percentile(pair.service, 0.99)
  const p99d = percentile(pair.direct, 0.99)
  console.log(
    `${pair.name.padEnd(44)} service p50 ${p50s.toFixed(2)} ms  p99 ${p99s.toFixed(2)} ms | direct p50 ${p50d.toFixed(2)} ms  p99 ${p99d.toFixed(2)} ms | added p50 ${(p50s - p50d).toFixed(2)} ms  p99 ${(p99s - p99d).toFixed(2)} ms`
  )
  return p50s - p50d
}

// ---------------------------------------------------------------- server
async function portIsFree(port: number) {
  return new Promise<boolean>((resolve) => {
    const probe = http.createServer()
    probe.once('error', () => resolve(false))
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)))
  })
}

if (!(await portIsFree(PORT))) {
  console.error(`Port ${PORT} is in use; pass --port <free port>.`)
  process.exit(1)
}

const upstream = await startUpstream()
const storage = mkdtempSync(join(tmpdir(), 'agent-host-chat-bench-'))
// BENCH_CPU_PROF=<dir> writes a CPU profile of the server (on exit) there.
const profile = process.env.BENCH_CPU_PROF
  ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`]
  : []
function startServer(cwd: string, port: number, flags: string[] = []) {
  return spawn(process.execPath, [...flags, '--import', '@poppinss/ts-exec', 'bin/server.ts'], {
    cwd,
    env: {
      ...process.env,
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      PORT: String(port),
      HOST: '127.0.0.1',
      APP_URL: `http://127.0.0.1:${port}`,
      STORAGE_DIR: storage,
      MODEL_API_URL: upstream.url,
      MODEL_API_KEY: 'sk-bench',
      MODEL_NAME: 'bench-model',
      PERIODIC_JOBS: 'false',
      // No agent runs here: no framework install or template build competes for the CPU.
      AGENT_PREPARE_FRAMEWORKS: 'off',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  })
}
const server = startServer(ROOT, PORT, profile)
/** The --baseline checkout's server, started once the first is up (they share STORAGE_DIR and its app key). */
let baselineServer: ReturnType<typeof spawn> | undefined
let serverExited = false
server.once('exit', () => (serverExited = true))

/** CPU time (user + system) the process has used so far, in ms (/proc/<pid>/stat, clock ticks). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const ticks = Number(fields[11]) + Number(fields[12])
  const hz = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100
  return (ticks * 1000) / hz
}

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024
}

async function waitForServer(base = BASE, exited = () => serverExited) {
  const deadline = Date.now() + 180_000
  while (Date.now() < deadline) {
    if (exited()) throw new Error('the server exited before it became healthy')
    try {
      const response = await timed(`${base}/health`, 'GET', {})
      if (response.status === 200) return
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  throw new Error('server did not become healthy')
}

async function setUp() {
  const email = `chat-bench-${Date.now()}@example.test`
  const password = 'bench-password-123'
  const json = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
    const response = await timed(`${BASE}${path}`, 'POST', headers, body)
    return { status: response.status, data: JSON.parse(response.text).data }
  }
  const register = await json('/auth/register', {
    email,
    username: `chatbench_${Date.now().toString(36)}`,
    password,
  })
  if (register.status !== 200) throw new Error(`register: ${register.status}`)
  let link: URL | undefined
  for (let i = 0; i < 100 && !link; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    let files: string[] = []
    try {
      files = readdirSync(join(storage, 'mail')).filter((file) => file.endsWith('.json'))
    } catch {}
    for (const file of files) {
      const mail = JSON.parse(readFileSync(join(storage, 'mail', file), 'utf8'))
      const match = /https?:\/\/\S+\/auth\/verify-email\/\S+/.exec(mail.text ?? '')
      if (mail.to.includes(email) && match) link = new URL(match[0])
    }
  }
  if (!link) throw new Error('no verification mail')
  await timed(`${BASE}${link.pathname}`, 'GET', { accept: 'application/json' })
  const login = await json('/auth/login', { email, password })
  const jwt: string = login.data.token
  const key = await json('/auth/api-keys', { label: 'bench' }, { authorization: `Bearer ${jwt}` })
  if (key.status !== 201) throw new Error(`api key: ${key.status}`)

  const proxyToken = `apx_${randomBytes(32).toString('base64url')}`
  const sha = (value: string) => createHash('sha256').update(value).digest('hex')
  const agentId = randomUUID()
  const db = new pg.Client({ connectionString: process.env.DATABASE_URL })
  await db.connect()
  const user = await db.query(
    `update users set tier = 'business', ai_credits_balance = 100000000 where email = $1 returning id`,
    [email]
  )
  await db.query(
    `insert into agents (id, user_id, name, slug, framework, status, config, message_count,
       proxy_token_hash, proxy_token_encrypted, webhook_token_hash, webhook_token_encrypted,
       created_at, updated_at)
     values ($1, $2, 'Bench agent', $3, 'openclaw', 'active', $4, 0, $5, 'unused', $6, 'unused', now(), now())`,
    [
      agentId,
      user.rows[0].id,
      `bench-agent-${agentId.slice(0, 8)}`,
      JSON.stringify({ personality: 'You are a benchmark agent.' }),
      sha(proxyToken),
      sha(`whk_${randomBytes(16).toString('hex')}`),
    ]
  )
  await db.end()
  return { jwt, apiKey: key.data.key as string, proxyToken, agentId }
}

// ---------------------------------------------------------------- run
try {
  await waitForServer()
  const { jwt, apiKey, proxyToken, agentId } = await setUp()
  const messages = [
    { role: 'system', content: 'You are a benchmark agent.' },
    { role: 'user', content: 'How fast are you?' },
  ]
  const direct = (stream: boolean) =>
    timed(
      `${upstream.url}/chat/completions`,
      'POST',
      { authorization: 'Bearer sk-bench' },
      {
        model: 'bench-model',
        messages,
        stream,
        ...(stream ? { stream_options: { include_usage: true } } : {}),
      },
      stream ? /"content":"\w/ : undefined
    )
  // `history: []`: the same two messages reach the upstream as in the direct call.
  const chatRoute = () =>
    timed(
      `${BASE}/api/v1/agents/${agentId}/chat`,
      'POST',
      { authorization: `Bearer ${apiKey}` },
      { message: 'How fast are you?', history: [] }
    )
  const proxy = (stream: boolean) =>
    timed(
      `${BASE}/v1/chat/completions`,
      'POST',
      { authorization: `Bearer ${proxyToken}` },
      { model: 'bench-model', messages, stream },
      stream ? /"content":"\w/ : undefined
    )
  const streamRoute = () =>
    timed(
      `${BASE}/agents/${agentId}/chat/stream`,
      'POST',
      { authorization: `Bearer ${jwt}` },
      { message: 'How fast are you?', history: [] },
      /data: \{"token"/
    )

  const pairs: Record<string, Pair> = {
    chat: { name: 'hosted chat POST /api/v1/agents/:id/chat', service: [], direct: [] },
    proxy: { name: 'model proxy POST /v1/chat/completions', service: [], direct: [] },
    sse: { name: 'first token POST /agents/:id/chat/stream', service: [], direct: [] },
    proxySse: { name: 'first token /v1/chat/completions stream', service: [], direct: [] },
    floor: { name: 'reference: GET /api/v1/me (key + quota)', service: [], direct: [] },
  }
  const check = (response: { status: number; text: string }, what: string) => {
    if (response.status !== 200)
      throw new Error(`${what}: ${response.status} ${response.text.slice(0, 300)}`)
  }
  const warmup = Math.min(50, Math.ceil(REQUESTS / 4))
  for (let i = 0; i < warmup + REQUESTS; i++) {
    const measured = i >= warmup
    const a = await chatRoute()
    check(a, 'chat route')
    const b = await direct(false)
    const c = await proxy(false)
    check(c, 'proxy')
    const d = await direct(false)
    const e = await streamRoute()
    check(e, 'stream route')
    const f = await direct(true)
    const g = await proxy(true)
    check(g, 'proxy stream')
    const h = await direct(true)
    const m = await timed(`${BASE}/api/v1/me`, 'GET', { authorization: `Bearer ${apiKey}` })
    check(m, 'me')
    const n = await timed(`${upstream.url}/models`, 'GET', {})
    if (!measured) continue
    pairs.floor.service.push(m.totalMs)
    pairs.floor.direct.push(n.totalMs)
    pairs.chat.service.push(a.totalMs)
    pairs.chat.direct.push(b.totalMs)
    pairs.proxy.service.push(c.totalMs)
    pairs.proxy.direct.push(d.totalMs)
    pairs.sse.service.push(e.firstMs)
    pairs.sse.direct.push(f.firstMs)
    pairs.proxySse.service.push(g.firstMs)
    pairs.proxySse.direct.push(h.firstMs)
  }

  console.log(
    `\nchat-overhead: ${REQUESTS} requests per path after ${warmup} warm-up, one at a time`
  )
  const added = [report(pairs.chat), report(pairs.proxy), report(pairs.sse), report(pairs.proxySse)]
  report(pairs.floor)
  console.log(
    `target: at most 5 ms added at p50 -> ${added.every((value) => value <= 5) ? 'met' : 'NOT met'} (${added.map((value) => value.toFixed(2)).join(', ')} ms)`
  )

  if (BASELINE) {
    let baselineExited = false
    baselineServer = startServer(BASELINE, PORT + 1)
    baselineServer.once('exit', () => (baselineExited = true))
    await waitForServer(BASELINE_BASE, () => baselineExited)
    const chatAt = (base: string) =>
      timed(
        `${base}/api/v1/agents/${agentId}/chat`,
        'POST',
        { authorization: `Bearer ${apiKey}` },
        { message: 'How fast are you?', history: [] }
      )
    const sides = [
      { base: BASE, pair: { name: 'hosted chat, this checkout', service: [], direct: [] } },
      { base: BASELINE_BASE, pair: { name: 'hosted chat, baseline', service: [], direct: [] } },
    ] as { base: string; pair: Pair }[]
    const pids = [server.pid!, baselineServer.pid!]
    let cpuBefore: number[] = []
    for (let i = 0; i < warmup + REQUESTS; i++) {
      if (i === warmup) cpuBefore = pids.map(cpuMs)
      for (const side of i % 2 === 0 ? sides : [...sides].reverse()) {
        const service = await chatAt(side.base)
        check(service, side.pair.name)
        const directCall = await direct(false)
        if (i < warmup) continue
        side.pair.service.push(service.totalMs)
        side.pair.direct.push(directCall.totalMs)
      }
    }
    // CPU per chat is steadier than latency on a shared machine (waiting for a core is not counted).
    const cpuPerChat = pids.map((pid, k) => (cpuMs(pid) - cpuBefore[k]) / REQUESTS)
    console.log(`\nA/B against ${BASELINE}: ${REQUESTS} hosted chats each, alternating`)
    console.log(
      `server CPU per hosted chat: this checkout ${cpuPerChat[0].toFixed(2)} ms, baseline ${cpuPerChat[1].toFixed(2)} ms`
    )
    report(sides[0].pair)
    report(sides[1].pair)
    const differences = sides[0].pair.service.map((ms, k) => sides[1].pair.service[k] - ms)
    console.log(
      `baseline minus this checkout, per pair: p50 ${percentile(differences, 0.5).toFixed(2)} ms`
    )
  }

  // WebSocket memory: idle connections on one instance.
  keepAlive.destroy()
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const before = rssMb(server.pid!)
  const sockets: WebSocket[] = []
  const wsUrl = `${BASE.replace(/^http/, 'ws')}/agents/${agentId}/ws`
  const started = performance.now()
  for (let opened = 0; opened < SOCKETS;) {
    const batch = Math.min(200, SOCKETS - opened)
    await Promise.all(
      Array.from(
        { length: batch },
        () =>
          new Promise<void>((resolve, reject) => {
            const ws = new WebSocket(wsUrl, { headers: { authorization: `Bearer ${jwt}` } })
            ws.once('open', () => resolve())
            ws.once('error', reject)
            ws.once('close', (code) => reject(new Error(`closed with ${code}`)))
            sockets.push(ws)
          })
      )
    )
    opened += batch
  }
  const openSecs = (performance.now() - started) / 1000
  // One round trip on the last socket proves they are live, then let the heap settle.
  await new Promise((resolve) => setTimeout(resolve, 3000))
  const after = rssMb(server.pid!)
  console.log(
    `websocket: ${SOCKETS} idle connections opened in ${openSecs.toFixed(1)} s; server RSS ${before.toFixed(1)} MB -> ${after.toFixed(1)} MB: +${(after - before).toFixed(1)} MB, ${(((after - before) * 1024) / SOCKETS).toFixed(1)} KB per connection`
  )
  for (const ws of sockets) ws.terminate()
} finally {
  keepAlive.destroy()
  upstream.close()
  if (baselineServer && baselineServer.exitCode === null && baselineServer.signalCode === null) {
    baselineServer.kill('SIGTERM')
    await new Promise((resolve) => baselineServer!.once('exit', resolve))
  }
  if (!serverExited) {
    server.kill('SIGTERM')
    await new Promise((resolve) => server.once('exit', resolve))
  }
  rmSync(storage, { recursive: true, force: true })
}
