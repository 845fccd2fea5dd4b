import { test } from '@japa/runner'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import app from '@adonisjs/core/services/app'
import { createUser, jwtFor, reloadUser } from '#tests/helpers/identity'

const run = promisify(execFile)

/** Runs `node ace user:role ...` as an operator would, on the test database. */
async function userRole(...args: string[]) {
  try {
    const { stdout, stderr } = await run(process.execPath, ['ace', 'user:role', ...args], {
      cwd: app.makePath(),
      env: { ...process.env, NODE_ENV: 'development', MIGRATE_ON_START: 'false' },
      timeout: 60_000,
    })
    return { code: 0, output: stdout + stderr }
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string }
    return { code: failed.code ?? 1, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` }
  }
}

test.group('node ace user:role', () => {
  test('sets a role; the new admin can grant AI Credits', async ({ client, assert }) => {
    const user = await createUser()
    const target = await createUser()
    const before = await client
      .post('/ai-credits/grant')
      .bearerToken(jwtFor(user))
      .json({ userId: target.id, credits: 5, reason: 'x' })
    before.assertStatus(403)

    const result = await userRole(user.email.toUpperCase(), 'admin')
    assert.equal(result.code, 0, result.output)
    assert.include(result.output, 'admin')
    const reloaded = await reloadUser(user)
    assert.equal(reloaded.role, 'admin')

    const after = await client
      .post('/ai-credits/grant')
      .bearerToken(jwtFor(user))
      .json({ userId: target.id, credits: 5, reason: 'x' })
    after.assertStatus(200)
  }).timeout(90_000)

  test('refuses an unknown role or address', async ({ assert }) => {
    const user = await createUser()
    const badRole = await userRole(user.email, 'superuser')
    assert.notEqual(badRole.code, 0)
    assert.include(badRole.output, 'superuser')
    const reloaded = await reloadUser(user)
    assert.equal(reloaded.role, 'user')

    const unknown = await userRole('nobody@example.test', 'support')
    assert.notEqual(unknown.code, 0)
    assert.include(unknown.output, 'nobody@example.test')
  }).timeout(90_000)
})
