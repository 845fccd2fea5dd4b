/**
 * The real server as a child process on a PostgreSQL of its own, for fault
 * tests that kill it, restart it or take its database away without
 * touching the test run's own server and database.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import WebSocket from 'ws'
import { requestJson, type JsonRequest } from '#tests/helpers/http'
import { linkIn, waitForMail } from '#tests/helpers/mail'
import { freePort, startServerProcess, waitFor, type ServerProcess } from '#tests/helpers/processes'
import {
  queryAt,
  startThrowawayPostgres,
  type ThrowawayPostgres,
} from '#tests/helpers/throwaway_postgres'
import { TEST_PASSWORD, uniqueEmail, uniqueUsername } from '#tests/helpers/identity'

export interface Answer {
  status: number
  body: any
}

export interface ServiceUnderFault {
  postgres: ThrowawayPostgres
  storage: string
  server: ServerProcess
  /** Fetch against the current server; a hang fails after `timeoutMs` (15 s). */
  call(path: string, init?: JsonRequest): Promise<Answer>
  /** A verified account signed in through the API; returns its JWT. */
  signUp(): Promise<string>
  /** The same, with the account's e-mail. */
  signUpAccount(): Promise<{ token: string; email: string }>
  /** POST /agents with the fixture framework for the JWT's account; returns the agent id. */
  createFixtureAgent(token: string, name: string): Promise<string>
  /** Waits until the agent's `container` reads `running`; answers the last status body otherwise. */
  waitUntilRunning(token: string, agentId: string, timeoutMs?: number): Promise<void>
  /** POST /agents/:id/chat/stream, answered (headers in) but not read. */
  openChatStream(token: string, agentId: string, message: string): Promise<Response>
  /** A chat WebSocket, open; `closed` resolves with its close code. */
  openChatSocket(
    token: string,
    agentId: string
  ): Promise<{ ws: WebSocket; closed: Promise<number>; messages: string[] }>
  /** One SQL statement on the service's own database (to check what a fault left behind). */
  query(sql: string, values?: unknown[]): Promise<any[]>
  /** SIGKILL: no shutdown hook runs. */
  kill9(): Promise<void>
  /** Starts a new server process on the same database and storage. */
  restart(): Promise<void>
  destroy(): Promise<void>
}

/**
 * Registers an account through the API of the server at `url`, follows the
 * verification link it wrote to `<storage>/mail` and signs in; answers the
 * JWT and the e-mail (the password is TEST_PASSWORD).
 */
export async function signUpAccountAt(
  url: string,
  storage: string
): Promise<{ token: string; email: string }> {
  const call = (path: string, json?: unknown) => requestJson(url, path, { json })
  const email = uniqueEmail('fault')
  const registered = await call('/auth/register', {
    email,
    username: uniqueUsername('f'),
    password: TEST_PASSWORD,
  })
  if (registered.status >= 300) throw new Error(`register: ${JSON.stringify(registered)}`)
  const mail = await waitForMail(email, { dir: join(storage, 'mail') })
  await call(linkIn(mail, '/auth/verify-email/').pathname)
  const login = await call('/auth/login', { email, password: TEST_PASSWORD })
  if (login.status !== 200) throw new Error(`login: ${JSON.stringify(login)}`)
  return { token: login.body.data.token as string, email }
}

export async function startServiceUnderFault(
  env: Record<string, string | undefined> = {}
): Promise<ServiceUnderFault> {
  const postgres = await startThrowawayPostgres()
  const storage = env.STORAGE_DIR ?? mkdtempSync(join(tmpdir(), 'fault-storage-'))
  const service = await serviceOn({ postgres, storage, env })
  const stop = service.destroy
  service.destroy = async () => {
    await stop()
    await postgres.destroy()
    if (!env.STORAGE_DIR) rmSync(storage, { recursive: true, force: true })
  }
  return service
}

/**
 * One server process on `postgres` and `storage` (which it does not own:
 * its `destroy` stops the server only). Several on the same database and
 * storage are instances of one service on one host (host_instances.ts).
 */
export async function serviceOn(options: {
  postgres: ThrowawayPostgres
  storage: string
  env?: Record<string, string | undefined>
}): Promise<ServiceUnderFault> {
  const { postgres, storage } = options
  const env = options.env ?? {}
  // One port for every run of it: a restart is the same service, as its agents see it (their
  // model-proxy URL names it; a checkpoint taken under another URL is never restored).
  const port = env.PORT ?? String(await freePort())
  const boot = async () => {
    const server = await startServerProcess({
      DATABASE_URL: postgres.url,
      LOG_LEVEL: 'warn',
      ...env,
      PORT: port,
      STORAGE_DIR: storage,
    })
    await waitFor(
      async () => {
        const answer = await fetch(`${server.url}/health`).catch(() => undefined)
        return answer?.status === 200 ? true : undefined
      },
      { timeoutMs: 90_000, what: `the server to serve:\n${server.output()}` }
    )
    return server
  }

  const service: ServiceUnderFault = {
    postgres,
    storage,
    server: await boot(),
    call(path, init = {}) {
      return requestJson(service.server.url, path, init)
    },
    async signUp() {
      const { token } = await service.signUpAccount()
      return token
    },
    signUpAccount() {
      return signUpAccountAt(service.server.url, storage)
    },
    async createFixtureAgent(token, name) {
      const created = await service.call('/agents', {
        method: 'POST',
        token,
        json: { name, framework: 'fixture' },
      })
      if (created.status !== 201) throw new Error(`create agent: ${JSON.stringify(created)}`)
      return created.body.data.id as string
    },
    async waitUntilRunning(token, agentId, timeoutMs = 30_000) {
      let last: unknown
      await waitFor(
        async () => {
          const status = await service.call(`/agents/${agentId}/status`, { token })
          last = status.body
          return status.body.data?.container === 'running' ? true : undefined
        },
        { timeoutMs, what: `agent ${agentId} to run` }
      ).catch((error: Error) => {
        throw new Error(`${error.message}; last status ${JSON.stringify(last)}`)
      })
    },
    openChatStream(token, agentId, message) {
      return fetch(`${service.server.url}/agents/${agentId}/chat/stream`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'authorization': `Bearer ${token}` },
        body: JSON.stringify({ message }),
      })
    },
    async openChatSocket(token, agentId) {
      const ws = new WebSocket(
        `${service.server.url.replace(/^http/, 'ws')}/agents/${agentId}/ws`,
        { headers: { authorization: `Bearer ${token}` } }
      )
      ws.on('error', () => {})
      const messages: string[] = []
      ws.on('message', (data) => messages.push(String(data)))
      const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)))
      await new Promise((resolve, reject) => {
        ws.once('open', resolve)
        ws.once('close', reject)
      })
      return { ws, closed, messages }
    },
    query(sql, values = []) {
      return queryAt(postgres.url, sql, values)
    },
    async kill9() {
      const exited = new Promise((resolve) => service.server.child.once('exit', resolve))
      service.server.child.kill('SIGKILL')
      await exited
    },
    async restart() {
      service.server = await boot()
    },
    async destroy() {
      await service.server.stop()
    },
  }
  return service
}
