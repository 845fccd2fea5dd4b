/**
 * `npm run fuzz`: property-based API fuzzing with schemathesis, driven by the
 * service's own /openapi.json (docs/hardening.md).
 *
 *   npm run fuzz [-- --seconds 600] [--examples 25] [--passes N] [--port 42710]
 *
 * It creates its own database (DATABASE_URL's server, database
 * `<name>_fuzz`, dropped and re-created) and storage folder, starts the local
 * Solana RPC node and price feeds the billing tests use, starts the server
 * from source against them with the test-only `fixture` framework (so no real
 * OpenClaw is ever booted), seeds accounts, payments, an agent, a ticket and a
 * referral through the API (seed.ts), then runs schemathesis passes (pinned in
 * .venv-fuzz) with new seeds until --seconds are spent: every built-in check,
 * a 2 s response-time limit and the custom checks in hooks.py. Prints the
 * figures; exits non-zero on any finding.
 */
import { spawn, spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { startPaymentStandIns } from '#tests/helpers/solana/payment_stand_ins'
import { TokenPriceServer } from '#tests/helpers/solana/token_price_server'
import { seed as seedService } from './seed.js'

// Pinned (hypothesis too) so every run generates from the same library code.
const SCHEMATHESIS_VERSION = '4.32.5'
const SCHEMATHESIS = [`schemathesis==${SCHEMATHESIS_VERSION}`, 'hypothesis==6.170.17']

const USAGE = `npm run fuzz [-- options]

  --seconds N    fuzzing time (default 150, FUZZ_SECONDS): passes with new seeds until it is spent
  --examples N   generated cases per operation and pass (default 25, FUZZ_MAX_EXAMPLES)
  --passes N     at most N passes (FUZZ_PASSES)
  --port N       port of the server the script starts (default 42710, FUZZ_PORT)

FUZZ_ST_ARGS adds options to \`st run\` (e.g. '--include-path-regex ^/agents');
FUZZ_KEEP_LOG=<file> keeps the request log (status, method, path, milliseconds, credential
prefix) and the server's own log beside it (<file>.server).

schemathesis ${SCHEMATHESIS_VERSION} (installed into .venv-fuzz), every check, custom checks in
scripts/fuzz/hooks.py; docs/hardening.md.`

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  console.log(USAGE)
  process.exit(0)
}

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`)
  return index > 0 ? Number(process.argv[index + 1]) : fallback
}

const SECONDS = option('seconds', Number(process.env.FUZZ_SECONDS ?? 150))
const EXAMPLES = option('examples', Number(process.env.FUZZ_MAX_EXAMPLES ?? 25))
const PASSES = option('passes', Number(process.env.FUZZ_PASSES ?? Infinity))
const PORT = option('port', Number(process.env.FUZZ_PORT ?? 42710))
/** More `st run` options, e.g. `FUZZ_ST_ARGS='--include-path-regex ^/agents'` to fuzz a few routes. */
const EXTRA_ST_ARGS = (process.env.FUZZ_ST_ARGS ?? '').split(' ').filter(Boolean)
const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BASE = `http://127.0.0.1:${PORT}`
const VENV = join(ROOT, '.venv-fuzz')

const adminUrl = new URL(
  process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/agent_host'
)
const fuzzDatabase = `${adminUrl.pathname.slice(1) || 'agent_host'}_fuzz`
const fuzzUrl = new URL(adminUrl)
fuzzUrl.pathname = `/${fuzzDatabase}`

/** The pinned schemathesis in .venv-fuzz, (re)installed when missing or of another version. */
function ensureSchemathesis() {
  const st = join(VENV, 'bin', 'st')
  if (existsSync(st)) {
    const version = spawnSync(st, ['--version'], { encoding: 'utf8' }).stdout ?? ''
    if (version.trim().endsWith(` ${SCHEMATHESIS_VERSION}`)) return st
    rmSync(VENV, { recursive: true, force: true })
  }
  const steps = [
    ['python3', ['-m', 'venv', VENV]],
    [join(VENV, 'bin', 'pip'), ['install', '-q', ...SCHEMATHESIS]],
  ] as const
  for (const [command, args] of steps) {
    const result = spawnSync(command, args, { stdio: 'inherit' })
    if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed`)
  }
  return st
}

async function recreateDatabase() {
  const maintenance = new URL(adminUrl)
  maintenance.pathname = '/postgres'
  const client = new pg.Client({ connectionString: maintenance.toString() })
  await client.connect()
  await client.query(`drop database if exists "${fuzzDatabase}" with (force)`)
  await client.query(`create database "${fuzzDatabase}"`)
  await client.end()
}

async function call(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown
) {
  const response = await fetch(`${BASE}${path}`, {
    method,
    headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await response.text()
  return { status: response.status, json: text ? JSON.parse(text) : undefined, text }
}

async function waitForServer(exited: () => boolean) {
  const deadline = Date.now() + 120_000
  while (Date.now() < deadline) {
    if (exited()) throw new Error('the server exited before it became healthy')
    try {
      const health = await call('GET', '/health')
      if (health.status === 200) return
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  throw new Error('server did not become healthy')
}

/** What a pass's JSON report (`--report json`) says; see schemathesis/cli/json_report.py. */
interface PassReport {
  operations?: { tested?: number } | null
  test_cases?: { generated?: number }
  failures?: { title: string; count: number; operations: string[] }[]
  errors?: { title: string; count: number }[]
}

/** One schemathesis pass over every operation; its output is shown and its report read for the figures. */
async function pass(st: string, env: NodeJS.ProcessEnv, seed: number, deadline: number) {
  const reportPath = join(env.FUZZ_STORAGE!, `pass-${seed}.json`)
  const run = spawn(
    st,
    [
      `--config-file=${join(ROOT, 'scripts/fuzz/schemathesis.toml')}`,
      'run',
      `${BASE}/openapi.json`,
      '--checks=all',
      // The 2 s response-time limit is in schemathesis.toml (where a few slow operations get more).
      `--max-examples=${EXAMPLES}`,
      `--seed=${seed}`,
      '--suppress-health-check=all',
      '--workers=1',
      '--report=json',
      `--report-json-path=${reportPath}`,
      '--generation-database=none',
      '--no-color',
      ...EXTRA_ST_ARGS,
    ],
    // Its working folder is the run's storage: the crash files it keeps stay out of the checkout.
    { stdio: ['ignore', 'pipe', 'inherit'], env, cwd: env.FUZZ_STORAGE }
  )
  run.stdout.on('data', (chunk: Buffer) => process.stdout.write(chunk))
  let interrupted = false
  const timer = setTimeout(
    () => {
      interrupted = true
      run.kill('SIGINT')
    },
    Math.max(0, deadline - Date.now())
  )
  const code = await new Promise<number>((resolve) => run.once('exit', (c) => resolve(c ?? 1)))
  clearTimeout(timer)
  const report: PassReport = existsSync(reportPath)
    ? JSON.parse(readFileSync(reportPath, 'utf8'))
    : {}
  const failures = report.failures ?? []
  const errors = report.errors ?? []
  const failed = failures.reduce((sum, failure) => sum + failure.count, 0)
  const errored = errors.reduce((sum, error) => sum + error.count, 0)
  const operations = report.operations?.tested ?? 0
  return {
    code,
    interrupted,
    summary: `${operations} operations, ${report.test_cases?.generated ?? 0} test cases, ${failed} failures, ${errored} errors`,
    operations,
    failed,
    errored,
    failures: failures.map((f) => `${f.title} ×${f.count}: ${f.operations.join(', ')}`),
  }
}

/** The server's warnings and errors by message, most frequent first (a finding's context). */
function printServerWarnings(file: string) {
  if (!existsSync(file)) return
  const byMessage = new Map<string, number>()
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue
    try {
      const entry = JSON.parse(line) as { level?: number; msg?: string; err?: { message?: string } }
      const cause = entry.err?.message ? ` (${entry.err.message})` : ''
      const key = `${entry.level === 40 ? 'warn' : 'error'}: ${entry.msg}${cause}`.slice(0, 300)
      byMessage.set(key, (byMessage.get(key) ?? 0) + 1)
    } catch {}
  }
  console.log(`  server warnings and errors:${byMessage.size === 0 ? ' none' : ''}`)
  for (const [message, count] of [...byMessage].sort((a, b) => b[1] - a[1]).slice(0, 25)) {
    console.log(`    ${count}× ${message}`)
  }
}

const st = ensureSchemathesis()
await recreateDatabase()
const storage = mkdtempSync(join(tmpdir(), 'agent-host-fuzz-'))
const requestLog = join(storage, 'fuzz-requests.log')
const serverLog = join(storage, 'server.log')
const payments = await startPaymentStandIns()
// Token scans read prices from a Jupiter-style API: USDC is known there.
const tokenPrices = await new TokenPriceServer().start()
tokenPrices.prices[payments.usdc.address] = { usdPrice: 1, decimals: 6 }
const server = spawn(process.execPath, ['--import', '@poppinss/ts-exec', 'bin/server.ts'], {
  cwd: ROOT,
  env: {
    ...process.env,
    NODE_ENV: 'test',
    PORT: String(PORT),
    HOST: '127.0.0.1',
    STORAGE_DIR: storage,
    DATABASE_URL: fuzzUrl.toString(),
    EXTRA_PLUGIN_DIRS: 'tests/fixtures/plugins',
    // The test suite's scrypt cost (bin/test.ts): at the production 2^17 one
    // hash takes 0.4-1 s on this 2-core host, so under load sign-in alone
    // would pass the 2 s limit, which is about the service's own work.
    PASSWORD_HASH_COST: '16384',
    ...payments.env,
    TOKEN_PRICE_API_URL: tokenPrices.url,
    // Nothing may leave the machine: a WhatsApp session meets a closed local port.
    WHATSAPP_WEB_URL: 'ws://127.0.0.1:1/ws/chat',
  },
  // Its log (warnings and errors: NODE_ENV=test) is summed up when the run finds something.
  stdio: ['ignore', openSync(serverLog, 'a'), 'inherit'],
})
let serverExited = false
server.once('exit', () => (serverExited = true))

const started = Date.now()
// --seconds counts fuzzing only: server start and seeding come on top.
let fuzzStarted = 0
const passes: Awaited<ReturnType<typeof pass>>[] = []
let status = 1
try {
  await waitForServer(() => serverExited)
  const { apiKey, jwt, pathIds } = await seedService({ call }, storage, payments)
  const env = {
    ...process.env,
    FUZZ_JWT: jwt,
    FUZZ_API_KEY: apiKey,
    FUZZ_REQUEST_LOG: requestLog,
    FUZZ_PATH_IDS: JSON.stringify(pathIds),
    FUZZ_STORAGE: storage,
    SCHEMATHESIS_HOOKS: 'hooks',
    PYTHONPATH: join(ROOT, 'scripts/fuzz'),
  }
  // Passes with new seeds until the time is spent (or --passes are done).
  fuzzStarted = Date.now()
  const deadline = fuzzStarted + SECONDS * 1000
  while (Date.now() < deadline && passes.length < PASSES) {
    const seed = Math.floor(Math.random() * 2 ** 31)
    console.log(`\nfuzz pass ${passes.length + 1}, --seed=${seed}`)
    const result = await pass(st, env, seed, deadline)
    passes.push({ ...result, seed } as typeof result)
    if (result.code !== 0 && !(result.interrupted && result.failed + result.errored === 0)) break
  }
  const findings = passes.reduce((sum, p) => sum + p.failed + p.errored, 0)
  const broken = passes.some((p) => p.code !== 0 && !p.interrupted)
  status = findings === 0 && !broken && passes.length > 0 ? 0 : 1
} catch (error) {
  console.error(error)
} finally {
  server.kill('SIGTERM')
  await new Promise((resolve) => (serverExited ? resolve(null) : server.once('exit', resolve)))
  const requests = existsSync(requestLog)
    ? readFileSync(requestLog, 'utf8').split('\n').filter(Boolean)
    : []
  const byStatus = new Map<string, number>()
  const answered2xx = new Set<string>()
  const called = new Set<string>()
  const slowest = new Map<string, number>()
  for (const line of requests) {
    const [code, method, path, ms] = line.split(' ')
    const operation = `${method} ${path}`
    byStatus.set(code, (byStatus.get(code) ?? 0) + 1)
    called.add(operation)
    if (code.startsWith('2')) answered2xx.add(operation)
    slowest.set(operation, Math.max(slowest.get(operation) ?? 0, Number(ms) || 0))
  }
  const never2xx = [...called].filter((operation) => !answered2xx.has(operation)).sort()
  const operations = Math.max(0, ...passes.map((p) => p.operations))
  const findings = passes.reduce((sum, p) => sum + p.failed + p.errored, 0)
  console.log('\nfuzz figures')
  for (const [index, p] of passes.entries()) {
    console.log(
      `  pass ${index + 1}: ${p.summary}${p.interrupted ? ' (stopped at the time limit)' : ''}`
    )
    for (const failure of p.failures) console.log(`    ${failure}`)
  }
  console.log(`  operations: ${operations}`)
  console.log(`  requests: ${requests.length}`)
  console.log(`  operations answering 2xx at least once: ${answered2xx.size}`)
  console.log(`  never 2xx: ${never2xx.join(', ')}`)
  console.log(
    `  statuses: ${[...byStatus]
      .sort()
      .map(([code, n]) => `${code}×${n}`)
      .join(' ')}`
  )
  console.log(
    `  slowest answers: ${[...slowest]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8)
      .map(([operation, ms]) => `${operation} ${ms} ms`)
      .join(', ')}`
  )
  console.log(`  findings: ${findings}`)
  if (findings > 0) printServerWarnings(serverLog)
  console.log(
    `  duration: ${fuzzStarted ? Math.round((Date.now() - fuzzStarted) / 1000) : 0} s of fuzzing in ${passes.length} pass(es), ${Math.round((Date.now() - started) / 1000)} s in all`
  )
  if (process.env.FUZZ_KEEP_LOG && existsSync(requestLog)) {
    copyFileSync(requestLog, process.env.FUZZ_KEEP_LOG)
    if (existsSync(serverLog)) copyFileSync(serverLog, `${process.env.FUZZ_KEEP_LOG}.server`)
  }
  rmSync(storage, { recursive: true, force: true })
  await Promise.all([payments.close(), tokenPrices.close()])
}
process.exit(status)
