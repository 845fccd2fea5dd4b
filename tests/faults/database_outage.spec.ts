import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { test } from '@japa/runner'
import { startServerProcess, waitFor, type ServerProcess } from '#tests/helpers/processes'
import {
  acceptsConnections,
  startThrowawayPostgres,
  type ThrowawayPostgres,
} from '#tests/helpers/throwaway_postgres'
import { describeFailures, steadyTraffic } from '#tests/helpers/outage_traffic'

interface Answer {
  status: number
  body: any
  ms: number
}

async function statusOf(url: string): Promise<number> {
  const answer = await call(url)
  return answer.status
}

async function loginStatus(server: ServerProcess): Promise<number> {
  const answer = await login(server)
  return answer.status
}

/** One request with a client-side limit: a hang fails the test instead of stalling it. */
async function call(url: string, init: RequestInit = {}): Promise<Answer> {
  const started = Date.now()
  const response = await fetch(url, { ...init, signal: AbortSignal.timeout(15_000) })
  const text = await response.text()
  let body: any = text
  try {
    body = JSON.parse(text)
  } catch {}
  return { status: response.status, body, ms: Date.now() - started }
}

function login(server: ServerProcess) {
  return call(`${server.url}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      email: `nobody-${Date.now()}@example.test`,
      password: 'wrong-password-1',
    }),
  })
}

test.group('Fault: PostgreSQL restarts while the service serves', (group) => {
  let postgres: ThrowawayPostgres
  let server: ServerProcess
  let storage: string

  group.setup(async () => {
    postgres = await startThrowawayPostgres()
    storage = mkdtempSync(join(tmpdir(), 'outage-storage-'))
    server = await startServerProcess({
      DATABASE_URL: postgres.url,
      STORAGE_DIR: storage,
      LOG_LEVEL: 'warn',
    })
    await waitFor(
      async () => ((await statusOf(`${server.url}/health`)) === 200 ? true : undefined),
      { timeoutMs: 90_000, what: 'the server to serve' }
    )
    return async () => {
      await server.stop()
      await postgres.destroy()
      rmSync(storage, { recursive: true, force: true })
    }
  })

  test('during the outage requests answer at once with a 503 envelope; after it, the service recovers by itself', async ({
    assert,
  }) => {
    assert.equal(await loginStatus(server), 401)
    const logBefore = server.output().length

    await postgres.stop()
    // Clients keep calling through the outage: how many fail, how fast each is answered.
    const traffic = steadyTraffic([() => call(`${server.url}/health`), () => login(server)])
    const during = [
      await call(`${server.url}/health`),
      await login(server),
      await call(`${server.url}/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          email: `outage-${Date.now()}@example.test`,
          username: `outage${Date.now()}`,
          password: 'a-long-password-1',
        }),
      }),
      await login(server),
    ]
    for (const answer of during) {
      assert.equal(answer.status, 503, JSON.stringify(answer.body))
      assert.deepEqual(Object.keys(answer.body).sort(), ['code', 'error', 'success'])
      assert.equal(answer.body.code, 'SERVER_ERROR')
      assert.notMatch(answer.body.error, /ECONNREFUSED|select|pg|knex/i)
      assert.isBelow(answer.ms, 5_000, 'answered promptly, not after a hang')
    }

    // An outage of about 2 s under steady traffic, then PostgreSQL returns.
    await sleep(2_000)
    await postgres.start()
    await waitFor(async () => ((await acceptsConnections(postgres.url)) ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 50,
      what: 'PostgreSQL to accept connections again',
    })
    // The outage ends when PostgreSQL accepts connections; the promise is 5 s from there.
    const back = Date.now()
    await waitFor(
      async () => ((await statusOf(`${server.url}/health`)) === 200 ? true : undefined),
      { timeoutMs: 30_000, intervalMs: 50, what: '/health to answer 200 again' }
    )
    const recoveredMs = Date.now() - back
    const answers = await traffic.stop()
    assert.equal(await loginStatus(server), 401, 'queries run again without a restart')
    const outage = answers.filter((answer) => answer.at - answer.ms < back)
    console.log(
      `    database outage: ${outage.length} requests during it, ` +
        `${describeFailures(outage, (answer) => answer.status !== 200 && answer.status !== 401)}; ` +
        `recovered ${recoveredMs} ms after PostgreSQL accepted connections again`
    )
    assert.isBelow(recoveredMs, 5_000, 'serving again within 5 s of the database returning')
    for (const answer of outage) {
      // Prompt, not a hang: generous for a loaded machine, far below any client timeout.
      assert.include([503, 200, 401], answer.status, JSON.stringify(answer))
      assert.isBelow(answer.ms, 5_000, `answered promptly: ${JSON.stringify(answer)}`)
    }
    assert.isAbove(
      outage.filter((answer) => answer.status === 503).length,
      0,
      'the outage was seen'
    )

    const logDuring = server.output().slice(logBefore)
    assert.notInclude(
      logDuring,
      '"unhandled error"',
      'an outage is not a storm of 500s with stacks'
    )
    assert.equal(server.child.exitCode, null, 'the service kept running')
  }).timeout(120_000)
})
