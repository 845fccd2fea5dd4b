import { test } from '@japa/runner'
import {
  decryptSecrets,
  encryptSecrets,
  maskSecrets,
  mergeConfig,
  stripMasks,
} from '#agents/services/config_secrets'

const config = {
  personality: 'Kind',
  apiKey: 'sk-live-123456',
  nested: { BotToken: 'tg-abc', deep: [{ clientSecret: 's3', label: 'x' }], note: 'n' },
  dbPassword: 'pw',
  monkey: 42,
  emptyToken: '',
}

test.group('Agent config secrets', () => {
  test('masking replaces every secret-named value at any depth, any case', ({ assert }) => {
    assert.deepEqual(maskSecrets(config), {
      personality: 'Kind',
      apiKey: '***',
      nested: { BotToken: '***', deep: [{ clientSecret: '***', label: 'x' }], note: 'n' },
      dbPassword: '***',
      monkey: '***',
      emptyToken: '',
    })
  })

  test('encryption hides secret values and decrypts back to the same config', ({ assert }) => {
    const stored = encryptSecrets(config)
    const text = JSON.stringify(stored)
    for (const secret of ['sk-live-123456', 'tg-abc', '"s3"', '"pw"']) {
      assert.notInclude(text, secret)
    }
    assert.equal(stored.personality, 'Kind')
    assert.deepEqual(decryptSecrets(stored), config)
  })

  test('a tampered ciphertext decrypts to null, never to the raw text', ({ assert }) => {
    const stored = encryptSecrets({ apiKey: 'sk-1' })
    assert.deepEqual(decryptSecrets({ apiKey: `${stored.apiKey}x` }), { apiKey: null })
    assert.deepEqual(decryptSecrets({ apiKey: 'plain' }), { apiKey: null })
  })

  test('merge: deep, null removes, *** keeps a stored secret, arrays replace', ({ assert }) => {
    const merged = mergeConfig(config, {
      apiKey: '***',
      nested: { BotToken: '***', note: 'changed', deep: [{ clientSecret: '***' }] },
      dbPassword: 'new',
      monkey: null,
      personality: '***',
    })
    assert.deepEqual(merged, {
      personality: '***',
      apiKey: 'sk-live-123456',
      nested: { BotToken: 'tg-abc', deep: [{}], note: 'changed' },
      dbPassword: 'new',
      emptyToken: '',
    })
  })

  test('prototype keys are dropped and inputs are not modified', ({ assert }) => {
    const patch = JSON.parse('{"__proto__": {"polluted": true}, "a": {"constructor": 1, "b": 2}}')
    const merged = mergeConfig({}, patch)
    assert.deepEqual(merged, { a: { b: 2 } })
    assert.isUndefined(({} as Record<string, unknown>).polluted)
    assert.deepEqual(stripMasks({ apiKey: '***', x: 1 }), { x: 1 })
    assert.equal(config.apiKey, 'sk-live-123456')
  })
})
