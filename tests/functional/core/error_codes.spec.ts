import { test } from '@japa/runner'
import * as apiExceptions from '#core/exceptions/api_exceptions'
import { baseUrl } from '#tests/helpers/http'

/** The spec's codes plus the four CONTRACT.md adds: nothing else may reach a client. */
const ALLOWED = [
  'AUTH_REQUIRED',
  'FORBIDDEN',
  'NOT_FOUND',
  'VALIDATION_ERROR',
  'AGENT_NOT_RUNNING',
  'RATE_LIMIT_EXCEEDED',
  'SERVER_ERROR',
  'GONE',
  'CONTENT_BLOCKED',
  'INSUFFICIENT_CREDITS',
  'EMAIL_NOT_VERIFIED',
]

test.group('Error codes', () => {
  test('every typed exception carries an allowed code', ({ assert }) => {
    for (const [name, value] of Object.entries(apiExceptions)) {
      if (typeof value !== 'function' || !(value.prototype instanceof apiExceptions.ApiException)) {
        continue
      }
      const Exception = value as unknown as new () => apiExceptions.ApiException
      assert.include(ALLOWED, new Exception().apiCode, name)
    }
  })

  test('the OpenAPI document lists only allowed codes', async ({ assert }) => {
    const answer = await fetch(`${baseUrl()}/openapi.json`)
    const text = await answer.text()
    const codes = new Set(
      [...text.matchAll(/"code":\s*\{[^}]*"enum":\s*\[([^\]]*)\]/g)].flatMap((m) =>
        [...m[1].matchAll(/"([A-Z_]+)"/g)].map((c) => c[1])
      )
    )
    for (const match of text.matchAll(/\\?"code\\?":\s*\\?"([A-Z_]+)\\?"/g)) codes.add(match[1])
    assert.isAbove(codes.size, 3)
    for (const code of codes) assert.include(ALLOWED, code)
  })
})
