/**
 * The real server for the benches that talk to it over HTTP (bench:lifecycle,
 * bench:backup): started from source (the test helpers' startServerProcess)
 * on a throwaway PostgreSQL of its own, with the test-only fixture framework
 * (NODE_ENV=test), and accounts made through its API.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { startServerProcess, waitFor } from '../../tests/helpers/processes.ts'
import { startThrowawayPostgres } from '../../tests/helpers/throwaway_postgres.ts'
import { requestJson, type JsonRequest } from '../../tests/helpers/http.ts'

export interface BenchService {
  url: string
  /** Its STORAGE_DIR (agents' folders under `agents/`). */
  storage: string
  /** What the server printed so far (stdout and stderr). */
  output(): string
  request(path: string, init?: Omit<JsonRequest, 'timeoutMs'>): ReturnType<typeof requestJson>
  sql(statement: string, params: unknown[]): Promise<void>
  /**
   * An account that may hold 10 agents: registered through the API,
   * verified and lifted to founding_member (no expiry) in the database,
   * signed in through the API. Answers its JWT.
   */
  account(): Promise<string>
  /** SIGINT: the server stops its agents (none outlives it), then its database and storage go. */
  stop(): Promise<void>
}

export async function startBenchService(
  name: string,
  env: Record<string, string> = {}
): Promise<BenchService> {
  const postgres = await startThrowawayPostgres()
  const storage = mkdtempSync(join(tmpdir(), `bench-${name}-`))
  const server = await startServerProcess({
    DATABASE_URL: postgres.url,
    STORAGE_DIR: storage,
    LOG_LEVEL: 'warn',
    NODE_ENV: 'test',
    EXTRA_PLUGIN_DIRS: 'tests/fixtures/plugins',
    SIGNUPS_PER_CLIENT_PER_DAY: '1000',
    ...env,
  })
  const stop = async () => {
    await server.stop()
    await postgres.destroy()
    rmSync(storage, { recursive: true, force: true })
  }
  try {
    await waitFor(
      async () => {
        const health = await fetch(`${server.url}/health`).catch(() => undefined)
        return health?.status === 200 ? true : undefined
      },
      { timeoutMs: 120_000, what: 'the server to serve' }
    )
  } catch (error) {
    console.error(server.output().slice(-4000))
    await stop()
    throw error
  }

  const request = (path: string, init: Omit<JsonRequest, 'timeoutMs'> = {}) =>
    requestJson(server.url, path, { ...init, timeoutMs: 120_000 })
  const sql = async (statement: string, params: unknown[]) => {
    const client = new pg.Client({ connectionString: postgres.url })
    await client.connect()
    try {
      await client.query(statement, params)
    } finally {
      await client.end()
    }
  }
  const account = async () => {
    const tag = randomBytes(5).toString('hex')
    const email = `bench-${tag}@example.com`
    const password = `Bench-${tag}-password-1`
    const registered = await request('/auth/register', {
      method: 'POST',
      json: { email, username: `bench${tag}`, password },
    })
    if (registered.status >= 300) throw new Error(`register: ${JSON.stringify(registered.body)}`)
    await sql(
      `update users set tier = 'founding_member', email_verified_at = now() where email = $1`,
      [email]
    )
    const login = await request('/auth/login', { method: 'POST', json: { email, password } })
    if (login.status !== 200) throw new Error(`login: ${JSON.stringify(login.body)}`)
    return login.body.data.token as string
  }
  return { url: server.url, storage, output: server.output, request, sql, account, stop }
}

export const percentile = (numbers: number[], p: number) => {
  const sorted = [...numbers].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}
