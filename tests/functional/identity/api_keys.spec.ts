import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { createUser, jwtFor } from '#tests/helpers/identity'

async function createKey(client: any, token: string, label = 'ci') {
  const response = await client.post('/auth/api-keys').bearerToken(token).json({ label })
  response.assertStatus(201)
  return response.body().data
}

async function expectStatus(pending: PromiseLike<any>, status: number) {
  const response = await pending
  response.assertStatus(status)
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 3000) {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  return true
}

test.group('API keys', () => {
  test('create returns the full key once; the list never shows it', async ({ client, assert }) => {
    const user = await createUser()
    const jwt = jwtFor(user)
    const created = await createKey(client, jwt, 'deploy bot')

    assert.deepEqual(Object.keys(created).sort(), ['createdAt', 'id', 'key', 'label', 'prefix'])
    assert.equal(created.label, 'deploy bot')
    assert.match(created.key, /^hk_/)
    assert.match(created.prefix, /^hk_/)
    assert.isTrue(created.key.startsWith(created.prefix))
    assert.isBelow(created.prefix.length, created.key.length / 2)
    assert.equal(new Date(created.createdAt).toISOString(), created.createdAt)

    const me = await client.get('/api/v1/me').bearerToken(created.key)
    me.assertStatus(200)
    assert.equal(me.body().data.id, user.id)

    const list = await client.get('/auth/api-keys').bearerToken(jwt)
    list.assertStatus(200)
    const keys = list.body().data.apiKeys
    assert.lengthOf(keys, 1)
    assert.deepEqual(Object.keys(keys[0]).sort(), [
      'createdAt',
      'id',
      'label',
      'lastUsedAt',
      'prefix',
    ])
    assert.equal(keys[0].id, created.id)
    assert.equal(keys[0].prefix, created.prefix)
    assert.notInclude(JSON.stringify(list.body()), created.key)
    assert.notInclude(JSON.stringify(list.body()), created.key.split('.')[1])
  })

  test('keys are stored hashed', async ({ client, assert }) => {
    const user = await createUser()
    const created = await createKey(client, jwtFor(user))
    const rows = await db.from('api_keys').where('tokenable_id', user.id)
    assert.lengthOf(rows, 1)
    const secret = created.key.split('.')[1]
    assert.notInclude(JSON.stringify(rows), secret)
    assert.match(rows[0].hash, /^[0-9a-f]{64}$/)
  })

  test('an unverified account cannot create a key', async ({ client, assert }) => {
    const user = await createUser({ verified: false })
    const response = await client
      .post('/auth/api-keys')
      .bearerToken(jwtFor(user))
      .json({ label: 'x' })
    response.assertStatus(403)
    assert.equal(response.body().code, 'EMAIL_NOT_VERIFIED')
  })

  test('label is required (1 to 100 characters)', async ({ client, assert }) => {
    const jwt = jwtFor(await createUser())
    for (const body of [{}, { label: '' }, { label: 'x'.repeat(101) }, { label: 5 }]) {
      const response = await client.post('/auth/api-keys').bearerToken(jwt).json(body)
      response.assertStatus(400)
      assert.equal(response.body().code, 'VALIDATION_ERROR')
      assert.include(response.body().error, 'label')
    }
  })

  test('a revoked key is refused at once', async ({ client, assert }) => {
    const user = await createUser()
    const jwt = jwtFor(user)
    const keep = await createKey(client, jwt, 'keep')
    const drop = await createKey(client, jwt, 'drop')
    await expectStatus(client.get('/api/v1/me').bearerToken(drop.key), 200)

    const revoked = await client.delete(`/auth/api-keys/${drop.id}`).bearerToken(jwt)
    revoked.assertStatus(200)
    assert.deepEqual(revoked.body().data, { id: drop.id, revoked: true })

    const refused = await client.get('/api/v1/me').bearerToken(drop.key)
    refused.assertStatus(401)
    assert.equal(refused.body().code, 'AUTH_REQUIRED')
    await expectStatus(client.get('/api/v1/me').bearerToken(keep.key), 200)

    const list = await client.get('/auth/api-keys').bearerToken(jwt)
    assert.deepEqual(
      list.body().data.apiKeys.map((k: any) => k.id),
      [keep.id]
    )
    const again = await client.delete(`/auth/api-keys/${drop.id}`).bearerToken(jwt)
    again.assertStatus(404)
  })

  test('a key verified many times (remembered) is refused at once when revoked', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const jwt = jwtFor(user)
    const drop = await createKey(client, jwt, 'hot')
    // First use reads the database, the next ones take the remembered verification.
    for (let i = 0; i < 3; i++) {
      await expectStatus(client.get('/api/v1/me').bearerToken(drop.key), 200)
    }
    const revoked = await client.delete(`/auth/api-keys/${drop.id}`).bearerToken(jwt)
    revoked.assertStatus(200)
    const refused = await client.get('/api/v1/me').bearerToken(drop.key)
    refused.assertStatus(401)
    assert.equal(refused.body().code, 'AUTH_REQUIRED')
    // A tampered secret of a remembered key is refused too.
    const keep = await createKey(client, jwt, 'keep')
    await expectStatus(client.get('/api/v1/me').bearerToken(keep.key), 200)
    await expectStatus(client.get('/api/v1/me').bearerToken(keep.key), 200)
    const tampered = keep.key.slice(0, -2) + (keep.key.endsWith('AA') ? 'BB' : 'AA')
    await expectStatus(client.get('/api/v1/me').bearerToken(tampered), 401)
  })

  test("another user's key cannot be revoked; bad ids are 404", async ({ client, assert }) => {
    const owner = await createUser()
    const other = await createUser()
    const key = await createKey(client, jwtFor(owner))
    const response = await client.delete(`/auth/api-keys/${key.id}`).bearerToken(jwtFor(other))
    response.assertStatus(404)
    assert.equal(response.body().code, 'NOT_FOUND')
    await expectStatus(client.get('/api/v1/me').bearerToken(key.key), 200)
    const bad = await client.delete('/auth/api-keys/not-a-uuid').bearerToken(jwtFor(other))
    bad.assertStatus(404)
  })

  test('a key on a dashboard route and a JWT on /api/v1 are refused', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const jwt = jwtFor(user)
    const key = await createKey(client, jwt)

    for (const path of [
      '/auth/api-keys',
      '/auth/notifications',
      '/ai-credits/balance',
      '/support/tickets',
    ]) {
      const response = await client.get(path).bearerToken(key.key)
      response.assertStatus(401)
      assert.equal(response.body().code, 'AUTH_REQUIRED')
      assert.match(response.body().error, /API key/i)
    }
    for (const path of ['/api/v1/me', '/api/v1/usage']) {
      const response = await client.get(path).bearerToken(jwt)
      response.assertStatus(401)
      assert.equal(response.body().code, 'AUTH_REQUIRED')
    }
  })

  test('forged and malformed keys are refused without a server error', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const created = await createKey(client, jwtFor(user))
    const key = created.key as string
    const [prefixed, secret] = key.split('.')
    const variants = [
      `${prefixed}.${secret.slice(0, -2)}xx`,
      `${prefixed}.`,
      'hk_',
      'hk_bm90LWEtdXVpZA.c2VjcmV0',
      `hk_${Buffer.from("1' or '1'='1").toString('base64url')}.c2VjcmV0`,
      `hk_%%%.???`,
    ]
    for (const variant of variants) {
      const response = await client.get('/api/v1/me').bearerToken(variant)
      response.assertStatus(401)
      assert.equal(response.body().code, 'AUTH_REQUIRED')
    }
  })

  test('lastUsedAt is recorded, but not written on every request', async ({ client, assert }) => {
    const user = await createUser()
    const jwt = jwtFor(user)
    const key = await createKey(client, jwt)
    const lastUsed = async () => {
      const row = await db.from('api_keys').where('id', key.id).first()
      return row.last_used_at as Date | null
    }
    assert.isNull(await lastUsed())

    await expectStatus(client.get('/api/v1/me').bearerToken(key.key), 200)
    assert.isTrue(await waitFor(async () => (await lastUsed()) !== null))
    const first = (await lastUsed())!.getTime()

    for (let i = 0; i < 5; i++)
      await expectStatus(client.get('/api/v1/me').bearerToken(key.key), 200)
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.equal((await lastUsed())!.getTime(), first)

    const list = await client.get('/auth/api-keys').bearerToken(jwt)
    assert.equal(new Date(list.body().data.apiKeys[0].lastUsedAt).getTime(), first)
  })
})
