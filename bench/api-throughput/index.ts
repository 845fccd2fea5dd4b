/**
 * Throughput of GET /api/v1/me (API key checked, daily quota counted) against
 * a bare route on the same server, in the same run.
 *
 *   DATABASE_URL=postgres://... node --import @poppinss/ts-exec bench/api-throughput/index.ts
 *     [--duration 8] [--connections 32] [--rounds 3] [--port $PORT or 4103]
 *
 * It starts the server from source (NODE_ENV=test, so the bare route
 * GET /__test/text exists) with its own STORAGE_DIR, creates an account the
 * real way (register, verification mail, login, API key), lifts it to the
 * business tier (500,000 requests a day) so the quota never refuses, then
 * alternates the two routes and prints requests per second and the ratio.
 * REDIS_URL, if set, is passed on (quota counters in Redis instead of
 * PostgreSQL).
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import http from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`)
  return index > 0 ? Number(process.argv[index + 1]) : fallback
}

const DURATION_S = option('duration', 8)
const CONNECTIONS = option('connections', 32)
const ROUNDS = option('rounds', 3)
const PORT = option('port', Number(process.env.PORT ?? 4103))
const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BASE = `http://127.0.0.1:${PORT}`

if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL (a PostgreSQL database the server may migrate).')
  process.exit(1)
}

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

const storage = mkdtempSync(join(tmpdir(), 'agent-host-bench-'))
// BENCH_CPU_PROF=<dir> writes a CPU profile of the server (on exit) there.
const profile = process.env.BENCH_CPU_PROF
  ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`]
  : []
const server = spawn(
  process.execPath,
  [...profile, '--import', '@poppinss/ts-exec', 'bin/server.ts'],
  {
    cwd: ROOT,
    env: {
      ...process.env,
      NODE_ENV: 'test',
      PORT: String(PORT),
      HOST: '127.0.0.1',
      STORAGE_DIR: storage,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  }
)
let serverExited = false
server.once('exit', () => (serverExited = true))

const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS })

function request(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown
) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const req = http.request(
      `${BASE}${path}`,
      {
        method,
        agent,
        headers: payload ? { ...headers, 'content-type': 'application/json' } : headers,
      },
      (res) => {
        let data = ''
        res.setEncoding('utf8')
        res.on('data', (chunk) => (data += chunk))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }))
      }
    )
    req.on('error', reject)
    req.end(payload)
  })
}

async function waitForServer() {
  const deadline = Date.now() + 120_000
  while (Date.now() < deadline) {
    if (serverExited) throw new Error('the server exited before it became healthy')
    try {
      const response = await request('GET', '/health')
      if (response.status === 200) return
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  throw new Error('server did not become healthy')
}

async function setUpAccount(): Promise<string> {
  const email = `bench-${Date.now()}@example.test`
  const password = 'bench-password-123'
  const register = await request(
    'POST',
    '/auth/register',
    {},
    {
      email,
      username: `bench_${Date.now().toString(36)}`,
      password,
    }
  )
  if (register.status !== 200) throw new Error(`register: ${register.status} ${register.body}`)

  let link: URL | undefined
  for (let i = 0; i < 100 && !link; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    const files = (() => {
      try {
        return readdirSync(join(storage, 'mail')).filter((f) => f.endsWith('.json'))
      } catch {
        return []
      }
    })()
    for (const file of files) {
      const mail = JSON.parse(readFileSync(join(storage, 'mail', file), 'utf8'))
      const match = /https?:\/\/\S+\/auth\/verify-email\/\S+/.exec(mail.text ?? '')
      if (mail.to.includes(email) && match) link = new URL(match[0])
    }
  }
  if (!link) throw new Error('no verification mail')
  const verify = await request('GET', link.pathname, { accept: 'application/json' })
  if (verify.status !== 200) throw new Error(`verify: ${verify.status}`)

  const login = await request('POST', '/auth/login', {}, { email, password })
  const jwt = JSON.parse(login.body).data.token
  const key = await request(
    'POST',
    '/auth/api-keys',
    { authorization: `Bearer ${jwt}` },
    { label: 'bench' }
  )
  if (key.status !== 201) throw new Error(`api key: ${key.status} ${key.body}`)

  const client = new pg.Client({ connectionString: process.env.DATABASE_URL })
  await client.connect()
  await client.query(`update users set tier = 'business' where email = $1`, [email])
  await client.end()
  return JSON.parse(key.body).data.key
}

interface Result {
  requests: number
  rps: number
  p50: number
  p99: number
  statuses: Record<number, number>
}

async function load(
  path: string,
  headers: Record<string, string>,
  seconds: number
): Promise<Result> {
  const latencies: number[] = []
  const statuses: Record<number, number> = {}
  const started = performance.now()
  const end = started + seconds * 1000
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now()
        const response = await request('GET', path, headers)
        latencies.push(performance.now() - t0)
        statuses[response.status] = (statuses[response.status] ?? 0) + 1
      }
    })
  )
  const elapsed = (performance.now() - started) / 1000
  latencies.sort((a, b) => a - b)
  return {
    requests: latencies.length,
    rps: latencies.length / elapsed,
    p50: latencies[Math.floor(latencies.length * 0.5)],
    p99: latencies[Math.floor(latencies.length * 0.99)],
    statuses,
  }
}

function line(name: string, r: Result) {
  return `${name.padEnd(34)} ${r.rps.toFixed(0).padStart(7)} req/s   p50 ${r.p50.toFixed(2)} ms   p99 ${r.p99.toFixed(2)} ms   statuses ${JSON.stringify(r.statuses)}`
}

try {
  await waitForServer()
  const apiKey = await setUpAccount()
  const auth = { authorization: `Bearer ${apiKey}` }
  const bare = '/__test/text'

  // Warm up both paths (JIT, connection pools).
  await load(bare, {}, 2)
  await load('/api/v1/me', auth, 2)

  const bareRuns: Result[] = []
  const meRuns: Result[] = []
  for (let round = 0; round < ROUNDS; round++) {
    bareRuns.push(await load(bare, {}, DURATION_S))
    meRuns.push(await load('/api/v1/me', auth, DURATION_S))
  }
  const mean = (runs: Result[]) => runs.reduce((sum, r) => sum + r.rps, 0) / runs.length

  console.log(
    `\napi-throughput: ${CONNECTIONS} connections, ${ROUNDS} x ${DURATION_S}s per route, quota store: ${process.env.REDIS_URL ? 'redis' : 'database'}`
  )
  bareRuns.forEach((r, i) => console.log(line(`bare GET ${bare} #${i + 1}`, r)))
  meRuns.forEach((r, i) => console.log(line(`GET /api/v1/me (key+quota) #${i + 1}`, r)))
  const ratio = mean(meRuns) / mean(bareRuns)
  // Each round measures both routes back to back: its ratio is the least
  // disturbed by other load on the machine drifting during the run.
  const roundRatios = meRuns.map((r, i) => r.rps / bareRuns[i].rps).sort((a, b) => a - b)
  const median = roundRatios[Math.floor(roundRatios.length / 2)]
  console.log(
    `mean: bare ${mean(bareRuns).toFixed(0)} req/s, /api/v1/me ${mean(meRuns).toFixed(0)} req/s, ratio ${(ratio * 100).toFixed(1)}% (target >= 50%)`
  )
  console.log(
    `per-round ratios: ${roundRatios.map((r) => `${(r * 100).toFixed(1)}%`).join(', ')}; median ${(median * 100).toFixed(1)}%`
  )
  const failures = meRuns.flatMap((r) => Object.keys(r.statuses)).filter((s) => s !== '200')
  if (failures.length > 0)
    console.log(`WARNING: non-200 answers on /api/v1/me: ${failures.join(', ')}`)
} finally {
  agent.destroy()
  if (!serverExited) {
    server.kill('SIGTERM')
    await new Promise((resolve) => server.once('exit', resolve))
  }
  rmSync(storage, { recursive: true, force: true })
}
