import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { tiers } from '#config/plans'
import { QuotaCounter } from '#identity/services/quota_service'
import { apiKeyFor, createUser } from '#tests/helpers/identity'

/** A quota subject nobody else counts against. */
async function subject(tier: keyof typeof tiers = 'free') {
  const user = await createUser({ tier })
  return { id: user.id, effectiveTier: tier }
}

async function usedSeenBy(counter: QuotaCounter, account: { id: string; effectiveTier: any }) {
  const quota = await counter.peek(account)
  return quota.used
}

test.group('Daily quota counting', () => {
  test('several instances sharing the store let exactly the limit through', async ({ assert }) => {
    const account = await subject()
    const instances = [new QuotaCounter(), new QuotaCounter(), new QuotaCounter()]
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) => instances[i % 3].consume(account))
    )
    const allowed = results.filter((r) => r.allowed)
    assert.equal(allowed.length, tiers.free.dailyRequestLimit)
    const numbers = allowed.map((r) => r.remaining)
    assert.equal(new Set(numbers).size, numbers.length, 'each request has its own number')
    assert.equal(await usedSeenBy(instances[0], account), tiers.free.dailyRequestLimit)
  })

  test('requests alternating between instances count down by one each', async ({ assert }) => {
    const account = await subject()
    const instances = [new QuotaCounter(), new QuotaCounter()]
    const remaining: number[] = []
    for (let i = 0; i < 12; i++) {
      const quota = await instances[i % 2].consume(account)
      remaining.push(quota.remaining)
    }
    const limit = tiers.free.dailyRequestLimit
    assert.deepEqual(
      remaining,
      Array.from({ length: 12 }, (_, i) => limit - 1 - i)
    )
    assert.equal(await usedSeenBy(instances[1], account), 12)
  })

  test('a burst on one instance is exact and reported exactly', async ({ assert }) => {
    const account = await subject('starter')
    const counter = new QuotaCounter()
    const results = await Promise.all(Array.from({ length: 500 }, () => counter.consume(account)))
    assert.isTrue(results.every((r) => r.allowed))
    const used = results.map((r) => r.used).sort((a, b) => a - b)
    assert.deepEqual(
      used,
      Array.from({ length: 500 }, (_, i) => i + 1)
    )
    assert.equal(await usedSeenBy(counter, account), 500)
  })

  test('each UTC day starts at zero', async ({ assert }) => {
    const account = await subject()
    const counter = new QuotaCounter()
    const today = new Date()
    await counter.consume(account, today)
    await counter.consume(account, today)
    const tomorrow = new Date(today.getTime() + 86_400_000)
    const next = await counter.consume(account, tomorrow)
    assert.equal(next.used, 1)
    assert.equal(
      next.resetAt.toISOString(),
      new Date(
        Date.UTC(tomorrow.getUTCFullYear(), tomorrow.getUTCMonth(), tomorrow.getUTCDate() + 1)
      ).toISOString()
    )
  })

  test('an upgrade after the limit was reached lets requests through again', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const key = await apiKeyFor(user)
    for (let i = 0; i < tiers.free.dailyRequestLimit; i++) {
      const response = await client.get('/api/v1/me').bearerToken(key)
      response.assertStatus(200)
    }
    const refused = await client.get('/api/v1/me').bearerToken(key)
    refused.assertStatus(429)

    await db.from('users').where('id', user.id).update({ tier: 'starter' })
    const deadline = Date.now() + 3000
    let status = 429
    while (status === 429 && Date.now() < deadline) {
      const response = await client.get('/api/v1/me').bearerToken(key)
      status = response.status()
      if (status === 200) {
        assert.equal(response.header('x-ratelimit-limit'), String(tiers.starter.dailyRequestLimit))
      }
    }
    assert.equal(status, 200)
  })
})
