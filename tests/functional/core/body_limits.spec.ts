import { test } from '@japa/runner'
import router from '@adonisjs/core/services/router'
import { BODY_LIMITS, bodyLimitFor } from '#core/http/body_limit_middleware'
import { postRaw } from '#tests/helpers/http'

test.group('Body size limits by route class', () => {
  test('each route class has its limit', ({ assert }) => {
    const limitOf = (method: string, pattern: string) => {
      const route = router
        .toJSON()
        .root.find((r) => r.pattern === pattern && r.methods.includes(method))
      assert.isDefined(route, `${method} ${pattern}`)
      return bodyLimitFor(route!.pattern).bytes
    }
    assert.equal(limitOf('PUT', '/agents/:id/container-files'), BODY_LIMITS.files)
    assert.equal(limitOf('POST', '/agents/:id/container-files/write'), BODY_LIMITS.files)
    assert.equal(limitOf('POST', '/agents/:id/chat/history'), BODY_LIMITS.large)
    assert.equal(limitOf('POST', '/v1/chat/completions'), BODY_LIMITS.large)
    assert.equal(limitOf('POST', '/api/v1/agents/:id/chat'), BODY_LIMITS.medium)
    assert.equal(limitOf('POST', '/webhooks/in/:token'), BODY_LIMITS.medium)
    assert.equal(limitOf('PATCH', '/agents/:id'), BODY_LIMITS.medium)
    assert.equal(limitOf('POST', '/auth/login'), BODY_LIMITS.small)
    assert.equal(limitOf('POST', '/support/tickets'), BODY_LIMITS.small)
  })

  test('a body over its class limit is a 413 in the envelope before anything reads it', async ({
    assert,
  }) => {
    const login = await postRaw('/auth/login', JSON.stringify({ email: 'x'.repeat(70 * 1024) }))
    assert.equal(login.status, 413)
    assert.deepInclude(login.json, { success: false, code: 'VALIDATION_ERROR' })
    assert.include(login.json.error, String(BODY_LIMITS.small))

    const chat = await postRaw(
      '/webhooks/in/some-token',
      JSON.stringify({ message: 'x'.repeat(300 * 1024) })
    )
    assert.equal(chat.status, 413)
    // Under its class limit the same route reads the body (and finds no such token).
    const small = await postRaw('/webhooks/in/some-token', JSON.stringify({ message: 'hi' }))
    assert.equal(small.status, 404)
  })
})
