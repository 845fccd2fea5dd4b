/**
 * Server time of every console page with 10,000 accounts and 20,000 agents
 * (plus backups, debits, tickets, payments and audit entries) in the database.
 *
 *   DATABASE_URL=postgres://.../empty_db node --import @poppinss/ts-exec bench/console/index.ts
 *     [--requests 40] [--port 4104]
 *
 * Starts the server from source on the given database (it migrates it),
 * seeds the rows with SQL (seeded agents are stopped, so nothing boots),
 * signs an admin in through the real login and TOTP forms, then requests
 * each page repeatedly and prints p50/p95 of the page's own Server-Timing
 * (whole server time: middleware, queries, rendering) and of the time the
 * client saw, next to a baseline in the same run: GET /health.
 */
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { Secret, TOTP } from 'otpauth'

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`)
  return index > 0 ? Number(process.argv[index + 1]) : fallback
}

const REQUESTS = option('requests', 40)
const PORT = option('port', 4104)
const ACCOUNTS = option('accounts', 10_000)
const AGENTS = option('agents', 20_000)
const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BASE = `http://127.0.0.1:${PORT}`
const PASSWORD = 'bench-password-123'

if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to an empty PostgreSQL database the bench may fill.')
  process.exit(1)
}

const storage = mkdtempSync(join(tmpdir(), 'agent-host-console-bench-'))
const server = spawn(process.execPath, ['--import', '@poppinss/ts-exec', 'bin/server.ts'], {
  cwd: ROOT,
  env: {
    ...process.env,
    NODE_ENV: 'production',
    PORT: String(PORT),
    HOST: '127.0.0.1',
    STORAGE_DIR: storage,
    LOG_LEVEL: 'warn',
  },
  stdio: ['ignore', 'inherit', 'inherit'],
})
let serverExited = false
server.once('exit', () => (serverExited = true))

async function waitForServer() {
  for (let i = 0; i < 600; i++) {
    if (serverExited) throw new Error('the server exited before it became healthy')
    try {
      const health = await fetch(`${BASE}/health`)
      if (health.ok) return
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  throw new Error('the server did not become healthy')
}

async function seed(db: pg.Client) {
  const { rows } = await db.query('select count(*)::int as n from users')
  if (rows[0].n >= ACCOUNTS) return
  const started = Date.now()
  // One scrypt hash for every seeded account (they never sign in, except the admin).
  await db.query(
    `insert into users (id, email, username, password, email_verified_at, role, tier, referral_code,
       ai_credits_balance, wallet_address, created_at, updated_at)
     select gen_random_uuid(), 'bench' || i || '@example.test', 'bench_' || i, 'x', now(), 'user',
       (array['pro','business'])[1 + i % 2], 'B' || lpad(i::text, 12, '0'), i % 5000,
       case when i % 10 = 0 then 'W' || lpad(i::text, 43, 'z') end,
       now() - (i || ' minutes')::interval, now()
     from generate_series(1, $1::int) i`,
    [ACCOUNTS]
  )
  await db.query(
    `insert into agents (id, user_id, name, slug, framework, status, config, message_count,
       proxy_token_hash, proxy_token_encrypted, webhook_token_hash, webhook_token_encrypted, created_at, updated_at)
     select gen_random_uuid(), u.id, 'Agent ' || i, 'agent-' || i, (array['openclaw','hermes'])[1 + i % 2],
       (array['stopped','error'])[1 + i % 2], '{"personality":"bench"}', i % 100,
       md5(i || 'p'), 'x', md5(i || 'w'), 'x', now() - (i || ' seconds')::interval, now()
     from generate_series(1, $1::int) i
     join lateral (select id from users where email = 'bench' || (1 + i % $2::int) || '@example.test') u on true`,
    [AGENTS, ACCOUNTS]
  )
  await db.query(
    `insert into support_tickets (id, user_id, subject, body, category, status, created_at, updated_at)
     select gen_random_uuid(), u.id, 'Ticket ' || i, 'Body of ticket ' || i, 'technical',
       (array['open','waiting','closed'])[1 + i % 3], now() - (i || ' minutes')::interval, now()
     from generate_series(1, 3000) i
     join lateral (select id from users where email = 'bench' || (1 + i % $1::int) || '@example.test') u on true`,
    [ACCOUNTS]
  )
  await db.query(
    `insert into payments (id, user_id, purchase_kind, purchase_key, billing_period, token, decimals,
       amount_base_units, usd_value, signature, payer, status, block_time, created_at, updated_at)
     select gen_random_uuid(), u.id, 'tier', 'pro', 'monthly', 'sol', 9, 140000000, 19.99,
       'S' || lpad(i::text, 87, 'z'), 'P' || lpad(i::text, 43, 'y'), 'completed', now(),
       now() - (i || ' minutes')::interval, now()
     from generate_series(1, 5000) i
     join lateral (select id from users where email = 'bench' || (1 + i % $1::int) || '@example.test') u on true`,
    [ACCOUNTS]
  )
  await db.query(
    `insert into audit_entries (actor_email, action, target_type, target_id, before, after, created_at)
     select 'admin@example.test', 'account.grant_credits', 'account', gen_random_uuid()::text,
       '{"aiCreditsBalance":0}', '{"aiCreditsBalance":100}', now() - (i || ' seconds')::interval
     from generate_series(1, 5000) i`
  )
  // Backup rows (no archives: the pages read metadata only) and hosted-call debits over two
  // months, which the agent page's backups and budget sections read.
  await db.query(
    `insert into agent_backups (id, agent_id, kind, size, sha256, include_secrets, created_at)
     select gen_random_uuid(), a.id, (array['manual','daily','pre-restore'])[k], 4096 * k,
       md5(a.id::text || k) || md5(k || a.id::text), false, now() - (k || ' days')::interval
     from agents a cross join generate_series(1, 3) k`
  )
  await db.query(
    `insert into credit_ledger (id, user_id, kind, credits, balance_after, provider, model, metadata, created_at)
     select gen_random_uuid(), a.user_id, 'llm', -(1 + i % 50), 0, 'bench', 'bench-model',
       jsonb_build_object('agentId', a.id), now() - ((i % 60) || ' days')::interval
     from generate_series(1, 100000) i
     join lateral (select id, user_id from agents where slug = 'agent-' || (1 + i % $1::int)) a on true`,
    [AGENTS]
  )
  await db.query('analyze')
  console.log(
    `seeded ${ACCOUNTS} accounts, ${AGENTS} agents (3 backups each), 100000 debits, 3000 tickets, 5000 payments, 5000 audit entries in ${((Date.now() - started) / 1000).toFixed(1)} s`
  )
}

class Visitor {
  cookies = new Map<string, string>()
  csrf = ''
  async request(method: string, path: string, form?: Record<string, string>) {
    const started = performance.now()
    const answer = await fetch(`${BASE}${path}`, {
      method,
      redirect: 'manual',
      headers: {
        cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      body: form ? new URLSearchParams({ ...form, _csrf: this.csrf }).toString() : undefined,
    })
    const html = await answer.text()
    const clientMs = performance.now() - started
    for (const line of answer.headers.getSetCookie()) {
      const [pair] = line.split(';')
      const at = pair.indexOf('=')
      this.cookies.set(pair.slice(0, at), pair.slice(at + 1))
    }
    const token = /name=['"]_csrf['"] value=['"]([^'"]+)['"]/.exec(html)
    if (token) this.csrf = token[1]
    const timing = /app;dur=([\d.]+)/.exec(answer.headers.get('server-timing') ?? '')
    return {
      status: answer.status,
      html,
      clientMs,
      serverMs: timing ? Number(timing[1]) : Number.NaN,
    }
  }
}

function textOption(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`)
  return index > 0 ? process.argv[index + 1] : undefined
}

/** `--screenshots <dir>`: a PNG of each page at 1280 px, and the overview on a phone. */
async function screenshots(dir: string, visitor: Visitor, pages: Array<[string, string]>) {
  const { chromium } = await import('playwright-core')
  mkdirSync(dir, { recursive: true })
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  })
  try {
    const cookies = [...visitor.cookies].map(([name, value]) => ({ name, value, url: BASE }))
    for (const [width, height, suffix] of [
      [1280, 900, ''],
      [390, 844, '-phone'],
    ] as const) {
      const context = await browser.newContext({ viewport: { width, height } })
      await context.addCookies(cookies)
      const page = await context.newPage()
      const shots = suffix ? pages.slice(0, 1) : pages
      for (const [label, path] of shots) {
        await page.goto(`${BASE}${path}`)
        const name = label
          .replace(/[^a-z0-9]+/gi, '-')
          .replace(/-+$/, '')
          .toLowerCase()
        await page.screenshot({ path: join(dir, `${name}${suffix}.png`) })
      }
      await context.close()
    }
    const anonymous = await browser.newPage({ viewport: { width: 1280, height: 600 } })
    await anonymous.goto(`${BASE}/console/login`)
    await anonymous.screenshot({ path: join(dir, 'login.png') })
  } finally {
    await browser.close()
  }
  console.log(`screenshots written to ${dir}`)
}

function percentile(values: number[], p: number) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

try {
  await waitForServer()
  const db = new pg.Client({ connectionString: process.env.DATABASE_URL })
  await db.connect()
  await seed(db)

  // An admin, signed in the real way (password, TOTP setup).
  const email = `bench-admin-${Date.now()}@example.test`
  const { rows: hashRows } = await db.query(`select 1`)
  void hashRows
  const register = await fetch(`${BASE}/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      email,
      username: `admin_${Date.now().toString(36)}`,
      password: PASSWORD,
    }),
  })
  if (!register.ok) throw new Error(`register failed: ${register.status}`)
  await db.query(`update users set role = 'admin', email_verified_at = now() where email = $1`, [
    email,
  ])
  const admin = new Visitor()
  await admin.request('GET', '/console/login')
  await admin.request('POST', '/console/login', { email, password: PASSWORD })
  const setup = await admin.request('GET', '/console/totp/setup')
  const secret = /id="totp-secret">([A-Z2-7]+)</.exec(setup.html)![1]
  const code = new TOTP({ label: email, secret: Secret.fromBase32(secret) }).generate()
  await admin.request('POST', '/console/totp/setup', { code })

  const { rows: sample } = await db.query(
    `select (select id from users where email = 'bench' || ($1::int / 2) || '@example.test') as account,
            (select id from agents order by created_at desc limit 1 offset ($2::int / 2)) as agent,
            (select id from support_tickets where status = 'open' limit 1) as ticket`,
    [ACCOUNTS, AGENTS]
  )
  await db.end()

  const pages: Array<[string, string]> = [
    ['baseline GET /health', '/health'],
    ['overview', '/console'],
    ['accounts', '/console/accounts'],
    ['accounts, page 200', '/console/accounts?page=200'],
    ['accounts, search "bench12"', '/console/accounts?q=bench12'],
    ['account detail', `/console/accounts/${sample[0].account}`],
    ['agents', '/console/agents'],
    ['agents, search "agent 19"', '/console/agents?q=agent%2019'],
    ['agent detail', `/console/agents/${sample[0].agent}`],
    ['support queue (open)', '/console/support?status=open'],
    ['ticket detail', `/console/support/${sample[0].ticket}`],
    ['payments', '/console/payments'],
    ['payments of an account', `/console/payments?q=bench${ACCOUNTS / 2}@`],
    ['audit', '/console/audit'],
  ]
  const rows: string[] = []
  for (const [label, path] of pages) {
    const serverMs: number[] = []
    const client: number[] = []
    for (let i = 0; i < REQUESTS; i++) {
      const answer = await admin.request('GET', path)
      if (answer.status !== 200) throw new Error(`${path} answered ${answer.status}`)
      if (i < 3) continue // warm-up
      if (!Number.isNaN(answer.serverMs)) serverMs.push(answer.serverMs)
      client.push(answer.clientMs)
    }
    const fmt = (v: number | undefined) => (v === undefined ? '-' : v.toFixed(1))
    rows.push(
      `| ${label} | ${serverMs.length ? fmt(percentile(serverMs, 50)) : '-'} | ${serverMs.length ? fmt(percentile(serverMs, 95)) : '-'} | ${fmt(percentile(client, 50))} | ${fmt(percentile(client, 95))} |`
    )
  }
  console.log(
    `\n${ACCOUNTS} accounts, ${AGENTS} agents; ${REQUESTS - 3} timed requests per page (ms)\n`
  )
  console.log('| page | server p50 | server p95 | client p50 | client p95 |')
  console.log('|---|---|---|---|---|')
  for (const row of rows) console.log(row)

  const shotsDir = textOption('screenshots')
  if (shotsDir) await screenshots(shotsDir, admin, pages.slice(1))
} finally {
  server.kill('SIGTERM')
  await new Promise((resolve) => (serverExited ? resolve(null) : server.once('exit', resolve)))
  rmSync(storage, { recursive: true, force: true })
}
