import { test } from '@japa/runner'
import { IncomingMessage, ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import testUtils from '@adonisjs/core/services/test_utils'
import InitializeAuthMiddleware from '#identity/middleware/initialize_auth_middleware'
import OptionalAuthMiddleware from '#identity/middleware/optional_auth_middleware'
import { apiKeyFor, createUser, jwtFor } from '#tests/helpers/identity'

/**
 * `optionalAuth` (used by GET /agents/by-slug/:slug): a request context run
 * through the same middleware chain a route uses.
 */
async function run(authorization?: string) {
  const req = new IncomingMessage(new Socket())
  if (authorization) req.headers.authorization = authorization
  const ctx = await testUtils.createHttpContext({ req, res: new ServerResponse(req) })
  let reached = false
  await new InitializeAuthMiddleware().handle(ctx, async () => {
    await new OptionalAuthMiddleware().handle(ctx, async () => {
      reached = true
    })
  })
  return { reached, user: ctx.auth.user }
}

test.group('optionalAuth middleware', () => {
  test('attaches the user of a valid JWT', async ({ assert }) => {
    const user = await createUser()
    const result = await run(`Bearer ${jwtFor(user)}`)
    assert.isTrue(result.reached)
    assert.equal(result.user?.id, user.id)
  })

  test('carries on without a user when no, a bad, or a non-JWT credential is sent', async ({
    assert,
  }) => {
    const user = await createUser()
    for (const header of [undefined, 'Bearer nope', `Bearer ${await apiKeyFor(user)}`]) {
      const result = await run(header)
      assert.isTrue(result.reached)
      assert.isUndefined(result.user)
    }
  })
})
