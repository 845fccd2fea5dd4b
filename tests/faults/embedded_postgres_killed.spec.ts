import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { describeFailures, steadyTraffic } from '#tests/helpers/outage_traffic'
import { startServerProcess, waitFor, type ServerProcess } from '#tests/helpers/processes'
import { acceptsConnections } from '#tests/helpers/throwaway_postgres'

/**
 * The embedded PostgreSQL (no DATABASE_URL) is killed with SIGKILL under a
 * running service: requests answer at once with the outage envelope, and
 * the service starts its database again and serves by itself, within 5 s
 * of that database accepting connections.
 */
test.group('Fault: the embedded PostgreSQL is killed', (group) => {
  let server: ServerProcess
  let storage: string

  group.setup(async () => {
    storage = mkdtempSync(join(tmpdir(), 'embedded-kill-'))
    server = await startServerProcess({ STORAGE_DIR: storage, LOG_LEVEL: 'warn' })
    await waitFor(
      async () => {
        const answer = await fetch(`${server.url}/health`)
        return answer.status === 200 ? true : undefined
      },
      {
        timeoutMs: 120_000,
        what: `the server to serve on its embedded database:\n${server.output()}`,
      }
    )
    return async () => {
      await server.stop()
      rmSync(storage, { recursive: true, force: true })
    }
  })

  function loginAnswer() {
    return fetch(`${server.url}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'nobody@example.test', password: 'wrong-password-1' }),
      signal: AbortSignal.timeout(15_000),
    })
  }

  async function loginStatus(): Promise<number> {
    const answer = await loginAnswer()
    return answer.status
  }

  test('requests answer with the outage envelope, then the service serves again by itself', async ({
    assert,
  }) => {
    assert.equal(await loginStatus(), 401)
    const pidFile = join(storage, 'postgres', 'postmaster.pid')
    const postmaster = Number(readFileSync(pidFile, 'utf8').split('\n')[0])
    assert.isAbove(postmaster, 0)

    const traffic = steadyTraffic([loginAnswer])
    process.kill(postmaster, 'SIGKILL')
    const killedAt = Date.now()
    // The service starts a new postmaster: the outage ends when that one accepts connections.
    const password = readFileSync(join(storage, 'postgres.password'), 'utf8').trim()
    const back = await waitFor(
      async () => {
        const lines = readFileSync(pidFile, 'utf8').split('\n')
        if (Number(lines[0]) === postmaster) return undefined
        const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${lines[3]}/postgres`
        return (await acceptsConnections(url)) ? Date.now() : undefined
      },
      {
        timeoutMs: 60_000,
        intervalMs: 50,
        what: 'the new embedded PostgreSQL to accept connections',
      }
    )
    const recoveredAt = await waitFor(
      async () => ((await loginStatus()) === 401 ? Date.now() : undefined),
      { timeoutMs: 30_000, intervalMs: 50, what: 'the service to use its database again' }
    )
    const answers = await traffic.stop()
    const outage = answers.filter((answer) => answer.at - answer.ms < back)
    console.log(
      `    embedded PostgreSQL killed: started again ${back - killedAt} ms after the kill; ` +
        `serving ${recoveredAt - back} ms after it accepted connections; ` +
        `${outage.length} requests meanwhile, ${describeFailures(outage, (answer) => answer.status !== 401)}`
    )
    assert.isBelow(recoveredAt - back, 5_000, 'serving within 5 s of the database being back')
    for (const answer of answers) {
      // Only the outage answer or the real one, promptly: never a 500, never a hang.
      assert.include([503, 401], answer.status, JSON.stringify(answer))
      assert.isBelow(answer.ms, 5_000, `answered promptly: ${JSON.stringify(answer)}`)
    }
    const restarted = Number(readFileSync(pidFile, 'utf8').split('\n')[0])
    assert.notEqual(restarted, postmaster)
  }).timeout(180_000)
})
