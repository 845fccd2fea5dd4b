import { test } from '@japa/runner'
import { redactSecrets, REDACTED } from '#core/logging/redaction'

test.group('Log redaction', () => {
  test('masks credentials at any depth and keeps the rest', ({ assert }) => {
    const line = redactSecrets({
      msg: 'request',
      requestId: 'abc',
      headers: {
        'authorization': 'Bearer hk_secret',
        'cookie': 'a=b',
        'x-forwarded-for': '1.2.3.4',
      },
      body: {
        email: 'a@example.com',
        password: 'hunter22',
        nested: [{ apiKey: 'sk-1' }, { refreshToken: 'hrt_x', label: 'kept' }],
        config: { telegramBotToken: '123:abc', personality: 'kind' },
      },
      txSignature: '5sig',
      tokens: 12,
    })
    assert.equal(line.headers.authorization, REDACTED)
    assert.equal(line.headers.cookie, REDACTED)
    assert.equal(line.headers['x-forwarded-for'], '1.2.3.4')
    assert.equal(line.body.password, REDACTED)
    assert.equal(line.body.email, 'a@example.com')
    assert.equal(line.body.nested[0].apiKey, REDACTED)
    assert.equal(line.body.nested[1].refreshToken, REDACTED)
    assert.equal(line.body.nested[1].label, 'kept')
    assert.equal(line.body.config.telegramBotToken, REDACTED)
    assert.equal(line.body.config.personality, 'kind')
    assert.equal(line.txSignature, REDACTED)
    assert.equal(line.tokens, 12)
    assert.equal(line.requestId, 'abc')
  })

  test('survives cycles', ({ assert }) => {
    const cyclic: Record<string, unknown> = { name: 'x' }
    cyclic.self = cyclic
    assert.equal(redactSecrets(cyclic).self, '[truncated]')
  })
})
