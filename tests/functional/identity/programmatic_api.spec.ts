import { test } from '@japa/runner'
import { DateTime } from 'luxon'
import { tiers } from '#config/plans'
import { apiKeyFor, createUser } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'

function nextUtcMidnightIso() {
  const now = new Date()
  return new Date(
    Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1)
  ).toISOString()
}

async function get(path: string, key: string) {
  const response = await fetch(`${baseUrl()}${path}`, {
    headers: { authorization: `Bearer ${key}` },
  })
  return {
    status: response.status,
    headers: response.headers,
    body: (await response.json()) as any,
  }
}

test.group('Programmatic API: /me and /usage', () => {
  test('GET /api/v1/me answers exactly the profile of the spec', async ({ client, assert }) => {
    const user = await createUser({ credits: 1234 })
    const response = await client.get('/api/v1/me').bearerToken(await apiKeyFor(user))
    response.assertStatus(200)
    assert.deepEqual(response.body(), {
      success: true,
      data: {
        id: user.id,
        walletAddress: null,
        referralCode: user.referralCode,
        platformCredits: 0,
        aiCreditsBalance: 1234,
        createdAt: user.createdAt.toUTC().toISO(),
      },
    })
  })

  test('GET /api/v1/usage counts itself and every other /api/v1 call', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const key = await apiKeyFor(user)
    await client.get('/api/v1/me').bearerToken(key)
    await client.get('/api/v1/me').bearerToken(key)
    const response = await client.get('/api/v1/usage').bearerToken(key)
    response.assertStatus(200)
    const limit = tiers.free.dailyRequestLimit
    assert.deepEqual(response.body().data, {
      today: 3,
      limit,
      remaining: limit - 3,
      resetAt: nextUtcMidnightIso(),
    })
  })

  test('every answer carries X-RateLimit-* headers', async ({ assert }) => {
    const user = await createUser({ tier: 'pro' })
    const key = await apiKeyFor(user)
    const first = await get('/api/v1/me', key)
    const second = await get('/api/v1/usage', key)
    const limit = String(tiers.pro.dailyRequestLimit)
    assert.equal(first.headers.get('x-ratelimit-limit'), limit)
    assert.equal(
      first.headers.get('x-ratelimit-remaining'),
      String(tiers.pro.dailyRequestLimit - 1)
    )
    assert.equal(
      second.headers.get('x-ratelimit-remaining'),
      String(tiers.pro.dailyRequestLimit - 2)
    )
    assert.equal(first.headers.get('x-ratelimit-reset'), nextUtcMidnightIso())
  })

  test('the limit is per account: all keys share it', async ({ assert }) => {
    const user = await createUser()
    const a = await apiKeyFor(user, 'a')
    const b = await apiKeyFor(user, 'b')
    await get('/api/v1/me', a)
    await get('/api/v1/me', b)
    const usage = await get('/api/v1/usage', a)
    assert.equal(usage.body.data.today, 3)
    const stranger = await get('/api/v1/usage', await apiKeyFor(await createUser()))
    assert.equal(stranger.body.data.today, 1)
  })

  test('request limit + 1 is 429 RATE_LIMIT_EXCEEDED, with the headers', async ({ assert }) => {
    const user = await createUser()
    const key = await apiKeyFor(user)
    const limit = tiers.free.dailyRequestLimit
    for (let i = 1; i <= limit; i++) {
      const response = await get('/api/v1/me', key)
      assert.equal(response.status, 200, `request ${i}`)
      assert.equal(response.headers.get('x-ratelimit-remaining'), String(limit - i))
    }
    const over = await get('/api/v1/me', key)
    assert.equal(over.status, 429)
    assert.deepEqual(Object.keys(over.body).sort(), ['code', 'error', 'success'])
    assert.equal(over.body.code, 'RATE_LIMIT_EXCEEDED')
    assert.equal(over.headers.get('x-ratelimit-limit'), String(limit))
    assert.equal(over.headers.get('x-ratelimit-remaining'), '0')
    assert.equal(over.headers.get('x-ratelimit-reset'), nextUtcMidnightIso())
    const usage = await get('/api/v1/usage', key)
    assert.equal(usage.status, 429)
  })

  test('150 concurrent requests with 100 left let exactly 100 through', async ({ assert }) => {
    const user = await createUser()
    const key = await apiKeyFor(user)
    assert.equal(tiers.free.dailyRequestLimit, 100)
    const results = await Promise.all(Array.from({ length: 150 }, () => get('/api/v1/me', key)))
    const statuses = results.map((r) => r.status)
    assert.equal(statuses.filter((s) => s === 200).length, 100)
    assert.equal(statuses.filter((s) => s === 429).length, 50)
    const remaining = results
      .filter((r) => r.status === 200)
      .map((r) => Number(r.headers.get('x-ratelimit-remaining')))
      .sort((x, y) => x - y)
    assert.deepEqual(
      remaining,
      Array.from({ length: 100 }, (_, i) => i)
    )
  })

  test('the limit follows the tier in config/plans.ts; a lapsed plan counts as free', async ({
    assert,
  }) => {
    for (const tier of ['starter', 'business', 'founding_member'] as const) {
      const key = await apiKeyFor(await createUser({ tier }))
      const response = await get('/api/v1/usage', key)
      assert.equal(response.body.data.limit, tiers[tier].dailyRequestLimit)
    }
    const lapsed = await createUser({ tier: 'pro' })
    lapsed.subscriptionExpiresAt = DateTime.now().minus({ minutes: 1 })
    await lapsed.save()
    const response = await get('/api/v1/usage', await apiKeyFor(lapsed))
    assert.equal(response.body.data.limit, tiers.free.dailyRequestLimit)
  })

  test('requests without a valid key are 401 and not counted', async ({ assert }) => {
    const none = await fetch(`${baseUrl()}/api/v1/me`)
    assert.equal(none.status, 401)
    const body = (await none.json()) as any
    assert.equal(body.code, 'AUTH_REQUIRED')
  })
})
