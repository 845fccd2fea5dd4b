import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { tiers } from '#config/plans'
import creditLedger from '#credits/services/credit_ledger'
import { authCache } from '#identity/services/auth_cache'
import { RATE_LIMITS_CONNECTION } from '#identity/providers/identity_provider'
import { apiKeyFor, createUser, jwtFor } from '#tests/helpers/identity'

/** Polls until `check` holds (changes made by raw SQL arrive by NOTIFY). */
async function eventually(check: () => Promise<boolean>, timeoutMs = 3000) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return true
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return false
}

/**
 * The auth cache must never make a change invisible: every path that
 * changes a user or a key (model, service, raw SQL from anywhere) reaches
 * the next request.
 */
test.group('Auth cache invalidation', () => {
  test('the cache is on in the test server (LISTEN connection up)', ({ assert }) => {
    assert.isTrue(authCache.enabled)
  })

  test('a balance change through the ledger shows on the very next request', async ({
    client,
    assert,
  }) => {
    const user = await createUser({ credits: 100 })
    const key = await apiKeyFor(user)
    const before = await client.get('/api/v1/me').bearerToken(key)
    assert.equal(before.body().data.aiCreditsBalance, 100)
    await creditLedger.debit(user.id, 40, { kind: 'llm' })
    const after = await client.get('/api/v1/me').bearerToken(key)
    assert.equal(after.body().data.aiCreditsBalance, 60)
  })

  test('a raw SQL balance change updates the cached row in place (no reload)', async ({
    client,
    assert,
  }) => {
    const user = await createUser({ credits: 100 })
    const key = await apiKeyFor(user)
    // The creation's own NOTIFY may arrive after the first request and evict what it
    // stored (as it should): ask until the row stays cached.
    assert.isTrue(
      await eventually(async () => {
        const before = await client.get('/api/v1/me').bearerToken(key)
        assert.equal(before.body().data.aiCreditsBalance, 100)
        return authCache.user(user.id)?.ai_credits_balance === 100
      })
    )

    await db.from('users').where('id', user.id).update({ ai_credits_balance: 75 })
    assert.isTrue(await eventually(async () => authCache.user(user.id)?.ai_credits_balance === 75))
    const after = await client.get('/api/v1/me').bearerToken(key)
    assert.equal(after.body().data.aiCreditsBalance, 75)
  })

  test('a raw SQL change of the user (another instance, another tool) is picked up', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const key = await apiKeyFor(user)
    const first = await client.get('/api/v1/usage').bearerToken(key)
    assert.equal(first.body().data.limit, tiers.free.dailyRequestLimit)

    await db.from('users').where('id', user.id).update({ tier: 'pro' })
    assert.isTrue(
      await eventually(async () => {
        const response = await client.get('/api/v1/usage').bearerToken(key)
        return response.body().data.limit === tiers.pro.dailyRequestLimit
      })
    )

    await db.from('users').where('id', user.id).update({ disabled_at: new Date() })
    assert.isTrue(
      await eventually(async () => {
        const response = await client.get('/api/v1/me').bearerToken(key)
        return response.status() === 401
      })
    )
  })

  test('a key deleted by raw SQL (revoked elsewhere) stops working', async ({ client, assert }) => {
    const user = await createUser()
    const key = await apiKeyFor(user)
    const ok = await client.get('/api/v1/me').bearerToken(key)
    ok.assertStatus(200)
    await db.from('api_keys').where('tokenable_id', user.id).delete()
    assert.isTrue(
      await eventually(async () => {
        const response = await client.get('/api/v1/me').bearerToken(key)
        return response.status() === 401
      })
    )
  })

  test('a model save (role change) reaches the dashboard at once', async ({ client }) => {
    const user = await createUser()
    const target = await createUser()
    const jwt = jwtFor(user)
    const refused = await client
      .post('/ai-credits/grant')
      .bearerToken(jwt)
      .json({ userId: target.id, credits: 1, reason: 'x' })
    refused.assertStatus(403)
    user.role = 'admin'
    await user.save()
    const granted = await client
      .post('/ai-credits/grant')
      .bearerToken(jwt)
      .json({ userId: target.id, credits: 1, reason: 'x' })
    granted.assertStatus(200)
  })

  test('quota counters are written without waiting for a WAL flush', async ({ assert }) => {
    const result = await db.connection(RATE_LIMITS_CONNECTION).rawQuery('show synchronous_commit')
    assert.equal(result.rows[0].synchronous_commit, 'off')
    const primary = await db.rawQuery('show synchronous_commit')
    assert.equal(primary.rows[0].synchronous_commit, 'on')
  })
})
