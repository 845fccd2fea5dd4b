import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { startServerProcess, waitFor, type ServerProcess } from '#tests/helpers/processes'

/**
 * The embedded PostgreSQL (no DATABASE_URL) is killed with SIGKILL under a
 * running service: requests answer at once with the outage envelope, and
 * the service starts its database again and serves by itself.
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

  async function loginStatus(): Promise<number> {
    const answer = await fetch(`${server.url}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'nobody@example.test', password: 'wrong-password-1' }),
      signal: AbortSignal.timeout(15_000),
    })
    return answer.status
  }

  test('requests answer with the outage envelope, then the service serves again by itself', async ({
    assert,
  }) => {
    assert.equal(await loginStatus(), 401)
    const pidFile = join(storage, 'postgres', 'postmaster.pid')
    const postmaster = Number(readFileSync(pidFile, 'utf8').split('\n')[0])
    assert.isAbove(postmaster, 0)

    process.kill(postmaster, 'SIGKILL')
    const killedAt = Date.now()
    const statuses: number[] = []
    const recoveredIn = await waitFor(
      async () => {
        const status = await loginStatus()
        statuses.push(status)
        return status === 401 ? Date.now() - killedAt : undefined
      },
      { timeoutMs: 30_000, intervalMs: 100, what: 'the service to use its database again' }
    )
    console.log(
      `    embedded PostgreSQL killed: serving again ${recoveredIn} ms later; ` +
        `${statuses.filter((status) => status === 503).length} requests answered 503 meanwhile`
    )
    // Only the outage answer or the real one: never a 500.
    assert.isTrue(
      statuses.every((status) => status === 503 || status === 401),
      String(statuses)
    )
    const restarted = Number(readFileSync(pidFile, 'utf8').split('\n')[0])
    assert.notEqual(restarted, postmaster)
  }).timeout(180_000)
})
