/**
 * `npm run fuzz`: property-based API fuzzing with schemathesis, driven by the
 * service's own /openapi.json.
 *
 *   npm run fuzz [-- --seconds 600] [--examples 25] [--port 42710]
 *
 * It creates its own database (DATABASE_URL's server, database
 * `<name>_fuzz`, dropped and re-created) and storage folder, starts the server
 * from source with the test-only `fixture` framework (so no real OpenClaw is
 * ever booted), seeds a verified account the real way (register,
 * verification mail, login, API key), a stopped agent and a support ticket,
 * then runs schemathesis (pinned in .venv-fuzz) with every built-in check,
 * a 2 s response-time limit and the custom envelope check in hooks.py.
 * Exits non-zero on any finding.
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'

// hypothesis pinned too: later releases dropped an internal schemathesis 3 uses.
const SCHEMATHESIS = ['schemathesis==3.39.16', 'hypothesis==6.120.0']

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`)
  return index > 0 ? Number(process.argv[index + 1]) : fallback
}

const SECONDS = option('seconds', Number(process.env.FUZZ_SECONDS ?? 150))
const EXAMPLES = option('examples', Number(process.env.FUZZ_MAX_EXAMPLES ?? 25))
const PORT = option('port', Number(process.env.FUZZ_PORT ?? 42710))
const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BASE = `http://127.0.0.1:${PORT}`
const VENV = join(ROOT, '.venv-fuzz')

const adminUrl = new URL(
  process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/agent_host'
)
const fuzzDatabase = `${adminUrl.pathname.slice(1) || 'agent_host'}_fuzz`
const fuzzUrl = new URL(adminUrl)
fuzzUrl.pathname = `/${fuzzDatabase}`

function ensureSchemathesis() {
  const st = join(VENV, 'bin', 'st')
  if (existsSync(st)) return st
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

async function seed(storage: string) {
  const stamp = Date.now().toString(36)
  const email = `fuzz-${stamp}@example.test`
  const password = 'fuzz-password-123'
  const register = await call(
    'POST',
    '/auth/register',
    {},
    { email, username: `fuzz_${stamp}`, password }
  )
  if (register.status !== 200) throw new Error(`register: ${register.status} ${register.text}`)

  let link: URL | undefined
  for (let i = 0; i < 100 && !link; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    const mailDir = join(storage, 'mail')
    for (const file of existsSync(mailDir) ? readdirSync(mailDir) : []) {
      if (!file.endsWith('.json')) continue
      const mail = JSON.parse(readFileSync(join(mailDir, file), 'utf8'))
      const match = /https?:\/\/\S+\/auth\/verify-email\/\S+/.exec(mail.text ?? '')
      if (mail.to.includes(email) && match) link = new URL(match[0])
    }
  }
  if (!link) throw new Error('no verification mail')
  const verify = await call('GET', link.pathname, { accept: 'application/json' })
  if (verify.status !== 200) throw new Error(`verify: ${verify.status}`)

  const login = await call('POST', '/auth/login', {}, { email, password })
  const jwt: string = login.json.data.token
  const auth = { authorization: `Bearer ${jwt}` }
  const key = await call('POST', '/auth/api-keys', auth, { label: 'fuzz' })
  if (key.status !== 201) throw new Error(`api key: ${key.status} ${key.text}`)

  const agent = await call('POST', '/agents', auth, { name: 'fuzz-agent', framework: 'fixture' })
  if (agent.status >= 300) throw new Error(`agent: ${agent.status} ${agent.text}`)
  await call('POST', `/agents/${agent.json.data.id}/stop`, auth)

  const ticket = await call('POST', '/support/tickets', auth, {
    subject: 'Fuzz ticket',
    body: 'Seeded for the fuzz run.',
    category: 'other',
  })
  if (ticket.status >= 300) throw new Error(`ticket: ${ticket.status} ${ticket.text}`)
  return { apiKey: key.json.data.key as string, jwt }
}

const st = ensureSchemathesis()
await recreateDatabase()
const storage = mkdtempSync(join(tmpdir(), 'agent-host-fuzz-'))
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
  },
  stdio: ['ignore', 'ignore', 'inherit'],
})
let serverExited = false
server.once('exit', () => (serverExited = true))

let status = 1
try {
  await waitForServer(() => serverExited)
  const { apiKey, jwt } = await seed(storage)
  const run = spawn(
    st,
    [
      'run',
      `${BASE}/openapi.json`,
      '--experimental=openapi-3.1',
      '--checks=all',
      '--max-response-time=2000',
      `--hypothesis-max-examples=${EXAMPLES}`,
      '--hypothesis-deadline=None',
      '--hypothesis-suppress-health-check=all',
      '--exitfirst=false',
      '--no-color',
    ].filter((arg) => arg !== '--exitfirst=false'),
    {
      stdio: 'inherit',
      env: {
        ...process.env,
        FUZZ_JWT: jwt,
        FUZZ_API_KEY: apiKey,
        SCHEMATHESIS_HOOKS: 'hooks',
        PYTHONPATH: join(ROOT, 'scripts/fuzz'),
      },
    }
  )
  const timer = setTimeout(() => run.kill('SIGINT'), SECONDS * 1000)
  status = await new Promise<number>((resolve) => run.once('exit', (code) => resolve(code ?? 1)))
  clearTimeout(timer)
} catch (error) {
  console.error(error)
} finally {
  server.kill('SIGTERM')
  await new Promise((resolve) => (serverExited ? resolve(null) : server.once('exit', resolve)))
  rmSync(storage, { recursive: true, force: true })
}
process.exit(status)
