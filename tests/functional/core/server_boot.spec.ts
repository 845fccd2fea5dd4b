import { test } from '@japa/runner'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execFileSync } from 'node:child_process'
import { startServerProcess, waitFor, type ServerProcess } from '#tests/helpers/processes'

/**
 * Boots the real server entrypoint with DATABASE_URL unset: it must start the
 * embedded PostgreSQL, migrate, serve /health, log a 500 with its request id,
 * redact secrets, report a dead database as 503, and stop cleanly.
 */
test.group('Server boot on the embedded PostgreSQL', (group) => {
  let storage: string
  let server: ServerProcess

  group.setup(async () => {
    storage = await mkdtemp(join(tmpdir(), 'agent-host-boot-'))
    server = await startServerProcess({
      STORAGE_DIR: storage,
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
    })
    await waitFor(
      async () => {
        const response = await fetch(`${server.url}/health`)
        return response.status === 200 ? true : undefined
      },
      { timeoutMs: 90_000, what: `/health of the booted server\n${server.output()}` }
    )
    return async () => {
      await server.stop()
      await rm(storage, { recursive: true, force: true })
    }
  })

  test('answers /health on the embedded database', async ({ assert }) => {
    const response = await fetch(`${server.url}/health`)
    assert.equal(response.status, 200)
    const body = (await response.json()) as any
    assert.deepInclude(body.data, { status: 'ok', database: 'ok', migrations: 'applied' })
    const pidFile = await readFile(join(storage, 'postgres', 'postmaster.pid'), 'utf8')
    assert.match(pidFile.split('\n')[0], /^\d+$/)
    const appKey = await readFile(join(storage, 'app_key'), 'utf8')
    assert.isAtLeast(appKey.trim().length, 32)
  }).timeout(100_000)

  test('logs a 500 with the request id it answered with', async ({ assert }) => {
    const response = await fetch(`${server.url}/__test/errors/unexpected`, {
      headers: { 'x-request-id': 'boot-test-request-500' },
    })
    assert.equal(response.status, 500)
    assert.equal(response.headers.get('x-request-id'), 'boot-test-request-500')
    const line = await waitFor(async () =>
      server
        .output()
        .split('\n')
        .find((entry) => entry.includes('unhandled error'))
    )
    assert.include(line, 'boot-test-request-500')
    // The error itself is logged (type and stack), only the body stays bare.
    assert.include(line, 'secret_table')
    assert.include(line, '"stack"')
  })

  test('redacts credentials in log lines', async ({ assert }) => {
    await fetch(`${server.url}/__test/log-secrets`, {
      method: 'POST',
      headers: {
        'authorization': 'Bearer hk_super_secret_key_value',
        'cookie': 'platform_refresh=hrt_cookie_secret_value',
        'content-type': 'application/json',
      },
      body: JSON.stringify({ password: 'p4ssw0rd-never-logged', apiKey: 'sk-never-logged' }),
    })
    const line = await waitFor(async () =>
      server
        .output()
        .split('\n')
        .find((entry) => entry.includes('test log with secrets'))
    )
    assert.include(line, '[redacted]')
    for (const secret of ['hk_super_secret', 'hrt_cookie_secret', 'p4ssw0rd', 'sk-never-logged']) {
      assert.notInclude(line, secret)
    }
  })

  test('answers 503 when the database is down', async ({ assert }) => {
    const pidFile = await readFile(join(storage, 'postgres', 'postmaster.pid'), 'utf8')
    const pid = pidFile.split('\n')[0].trim()
    execFileSync('kill', ['-INT', pid])
    const body = await waitFor(async () => {
      const response = await fetch(`${server.url}/health`)
      return response.status === 503 ? ((await response.json()) as any) : undefined
    })
    assert.deepEqual(body, {
      success: false,
      error: 'Database unreachable',
      code: 'SERVER_ERROR',
    })
  })

  test('stops cleanly on SIGINT', async ({ assert }) => {
    const code = await server.stop()
    assert.equal(code, 0)
  })
})
