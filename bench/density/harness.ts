/**
 * What bench:density's modes share: the real server on a PostgreSQL of its
 * own, accounts signed up through the API, and small helpers.
 */
import { existsSync, readdirSync } from 'node:fs'
import { mkdtemp, readFile, rm, symlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { mailFileTag } from '#identity/services/file_mail_transport'
import { startServerProcess, type ServerProcess } from '../../tests/helpers/processes.ts'
import { queryAt, startThrowawayPostgres } from '../../tests/helpers/throwaway_postgres.ts'
import { requestJson } from '../../tests/helpers/http.ts'

const PASSWORD = 'density-bench-password'

export interface Account {
  email: string
  jwt: string
  key: string
}

export interface Answer {
  status: number
  body: any
}

export interface BenchServer {
  server: ServerProcess
  storage: string
  /** The throwaway PostgreSQL's URL (another instance of the service may share it). */
  databaseUrl: string
  /** The environment the server was started with (another instance starts with the same). */
  env: Record<string, string | undefined>
  /** Answers by status code over the whole run. */
  statuses: Map<number, number>
  call(path: string, init?: { method?: string; token?: string; json?: unknown }): Promise<Answer>
  query(sql: string, values?: unknown[]): Promise<unknown[]>
  stop(): Promise<void>
}

/**
 * Starts bin/server.ts with the process driver on a throwaway PostgreSQL
 * and storage; `env` is added to the bench's own settings.
 */
export async function startBenchServer(
  framework: string,
  env: Record<string, string | undefined>
): Promise<BenchServer> {
  const postgres = await startThrowawayPostgres()
  const storage = await mkdtemp(join(tmpdir(), 'density-storage-'))
  // The framework is installed once per host: reuse the project's runtime cache.
  const sharedRuntime = join(import.meta.dirname, '..', '..', 'storage', 'runtime')
  if (existsSync(sharedRuntime)) await symlink(sharedRuntime, join(storage, 'runtime'))
  const serverEnv = {
    DATABASE_URL: postgres.url,
    STORAGE_DIR: storage,
    // Every account signs up from this one address (the default allows 10 a day).
    SIGNUPS_PER_CLIENT_PER_DAY: '1000000',
    LOG_LEVEL: 'warn',
    // The fixture framework lives with the tests and loads in the test environment only.
    ...(framework === 'fixture'
      ? { NODE_ENV: 'test', EXTRA_PLUGIN_DIRS: 'tests/fixtures/plugins' }
      : {}),
    ...env,
  }
  const server = await startServerProcess(serverEnv)
  for (let i = 0; ; i++) {
    const health = await fetch(`${server.url}/health`).catch(() => undefined)
    if (health?.status === 200) break
    if (i > 900) throw new Error(`server did not start:\n${server.output()}`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  const statuses = new Map<number, number>()
  const bench: BenchServer = {
    server,
    storage,
    databaseUrl: postgres.url,
    env: serverEnv,
    statuses,
    async call(path, init = {}) {
      // A burst may keep a request waiting long: the bench waits rather than aborts.
      const answer = await requestJson(server.url, path, { ...init, timeoutMs: 600_000 })
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1)
      return answer
    },
    query(sql, values = []) {
      return queryAt(postgres.url, sql, values)
    },
    async stop() {
      process.off('SIGINT', interrupted).off('SIGTERM', interrupted)
      await server.stop()
      await postgres.destroy()
      await rm(storage, { recursive: true, force: true })
    },
  }
  // A bench stopped midway (Ctrl-C) stops its server as the end of a run does.
  const interrupted = () => void bench.stop().finally(() => process.exit(130))
  process.once('SIGINT', interrupted).once('SIGTERM', interrupted)
  return bench
}

export async function pool<T>(items: T[], limit: number, work: (item: T) => Promise<void>) {
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await work(items[next++])
    })
  )
}

export function percentile(numbers: number[], p: number): number {
  if (numbers.length === 0) return Number.NaN
  const sorted = [...numbers].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}

/** A verified account with a JWT and an API key (register, mailed link, login). */
export async function signUp(bench: BenchServer, index: number): Promise<Account> {
  const email = `density-${index}-${Date.now()}@example.test`
  const registered = await bench.call('/auth/register', {
    method: 'POST',
    json: { email, username: `density${index}x${Date.now() % 100000}`, password: PASSWORD },
  })
  // Every figure assumes all accounts exist: stop rather than measure fewer agents
  // (register answers 200 whether or not the address is new, 429 over the sign-up limit).
  if (registered.status !== 200 && registered.status !== 201) {
    throw new Error(`register answered ${registered.status}: ${JSON.stringify(registered.body)}`)
  }
  const tag = mailFileTag(email)
  let link: string | undefined
  // Up to 20 s: the first mail of a fresh server loads the mail modules first.
  for (let attempt = 0; attempt < 400 && !link; attempt++) {
    let names: string[] = []
    try {
      names = readdirSync(join(bench.storage, 'mail'))
    } catch {}
    const file = names.find((name) => name.endsWith(`-${tag}.json`))
    if (file) {
      const mail = JSON.parse(await readFile(join(bench.storage, 'mail', file), 'utf8'))
      link = /https?:\/\/\S+\/auth\/verify-email\/\S+/.exec(mail.text)?.[0]
    }
    if (!link) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  if (!link) throw new Error(`no verification mail for ${email}`)
  await bench.call(new URL(link).pathname)
  const login = await bench.call('/auth/login', {
    method: 'POST',
    json: { email, password: PASSWORD },
  })
  if (login.status !== 200) {
    throw new Error(`login answered ${login.status}: ${JSON.stringify(login.body)}`)
  }
  const jwt = login.body.data.token as string
  const key = await bench.call('/auth/api-keys', {
    method: 'POST',
    token: jwt,
    json: { label: 'bench' },
  })
  return { email, jwt, key: key.body.data.key as string }
}
