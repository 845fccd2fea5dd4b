import { test } from '@japa/runner'
import { DateTime } from 'luxon'
import db from '@adonisjs/lucid/services/db'
import { addons, foundingMemberSlots, tierOrder, tiers } from '#config/plans'
import AddonSubscription from '#billing/models/addon_subscription'
import { agentLimitFor } from '#billing/services/agent_limits'
import { createUser, jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'

test.group('GET /features (public catalogue)', () => {
  test('every tier keyed by key, the order, the add-ons and the founding slots', async ({
    client,
    assert,
  }) => {
    const response = await client.get('/features')
    response.assertStatus(200)
    const data = response.body().data
    assert.deepEqual(data.tierOrder, ['free', 'starter', 'pro', 'business', 'founding_member'])
    assert.sameMembers(Object.keys(data.tiers), tierOrder)
    // The spec's catalogue table, row by row.
    const expected: Record<string, [number, number, number]> = {
      free: [0, 1, 500],
      starter: [6.99, 1, 3000],
      pro: [19.99, 3, 15000],
      business: [49.99, 5, 40000],
      founding_member: [99, 10, 25000],
    }
    for (const [key, [usdPrice, includedAgents, aiCreditsMonthly]] of Object.entries(expected)) {
      assert.deepEqual(data.tiers[key], {
        key,
        name: tiers[key as keyof typeof tiers].name,
        usdPrice,
        includedAgents,
        aiCreditsMonthly,
        dailyRequestLimit: tiers[key as keyof typeof tiers].dailyRequestLimit,
        maxSkills: tiers[key as keyof typeof tiers].maxSkills,
        maxSchedules: tiers[key as keyof typeof tiers].maxSchedules,
        minScheduleIntervalMinutes: tiers[key as keyof typeof tiers].minScheduleIntervalMinutes,
        dailyTokenScanLimit: 10,
        dailyResearchLimit: 20,
      })
    }
    assert.equal(data.tiers.free.dailyRequestLimit, 100)
    assert.equal(data.tiers.free.maxSkills, 2)
    assert.equal(data.tiers.free.maxSchedules, 2)
    assert.equal(data.tiers.free.minScheduleIntervalMinutes, 5)
    assert.equal(data.tiers.founding_member.dailyRequestLimit, 500_000)
    assert.deepEqual(data.addons, [
      {
        key: 'addon.agents.3',
        name: addons['addon.agents.3'].name,
        usdPrice: 6.99,
        type: 'subscription',
      },
      {
        key: 'addon.ai_credits.25000',
        name: addons['addon.ai_credits.25000'].name,
        usdPrice: 30,
        type: 'one_time',
      },
    ])
    const row = await db.from('founding_slots').count('* as taken').first()
    const taken = Number(row.taken)
    assert.deepEqual(data.founding, {
      maxSlots: 20,
      taken,
      remaining: Math.max(0, foundingMemberSlots - taken),
    })
  })
})

test.group('GET /features/account', () => {
  test('a free account: the spec fields with the free limits', async ({ client, assert }) => {
    const user = await createUser({ credits: 321 })
    const response = await client.get('/features/account').bearerToken(jwtFor(user))
    response.assertStatus(200)
    assert.deepEqual(response.body().data, {
      tier: 'free',
      tierConfig: { key: 'free', name: 'Free', includedAgents: 1 },
      activeAddons: [],
      agentLimit: 1,
      agentCount: 0,
      platformCredits: 0,
      aiCredits: { balance: 321, monthlyGrant: 500, tier: 'free' },
      subscriptionExpiresAt: null,
      chatLimit: 100,
      searchLimit: 20,
    })
  })

  test('a paid tier with active and expired agent packs: only active packs count', async ({
    client,
    assert,
  }) => {
    const expires = DateTime.utc().plus({ days: 12 }).startOf('second')
    const user = await createUser({ tier: 'business' })
    user.subscriptionExpiresAt = expires
    await user.save()
    const now = DateTime.utc()
    const active = await AddonSubscription.create({
      userId: user.id,
      addonKey: 'addon.agents.3',
      extraAgents: 3,
      paymentId: null,
      startsAt: now.minus({ days: 3 }),
      expiresAt: now.plus({ days: 27 }),
    })
    await AddonSubscription.create({
      userId: user.id,
      addonKey: 'addon.agents.3',
      extraAgents: 3,
      paymentId: null,
      startsAt: now.minus({ days: 40 }),
      expiresAt: now.minus({ days: 10 }),
    })

    const response = await client.get('/features/account').bearerToken(jwtFor(user))
    response.assertStatus(200)
    const data = response.body().data
    assert.equal(data.tier, 'business')
    assert.deepEqual(data.tierConfig, { key: 'business', name: 'Business', includedAgents: 5 })
    assert.deepEqual(data.activeAddons, [
      {
        key: 'addon.agents.3',
        name: addons['addon.agents.3'].name,
        extraAgents: 3,
        expiresAt: active.expiresAt.toUTC().toISO(),
      },
    ])
    assert.equal(data.agentLimit, 8)
    assert.equal(await agentLimitFor(user.id), 8)
    assert.equal(data.subscriptionExpiresAt, expires.toUTC().toISO())
    assert.equal(data.chatLimit, 500_000)
    assert.equal(data.searchLimit, 20)
    assert.deepEqual(data.aiCredits, { balance: 0, monthlyGrant: 40_000, tier: 'business' })
  })

  test('a paid tier past its expiry counts as free before the lapse job runs', async ({
    client,
    assert,
  }) => {
    const user = await createUser({ tier: 'pro' })
    user.subscriptionExpiresAt = DateTime.utc().minus({ minutes: 1 })
    await user.save()
    const response = await client.get('/features/account').bearerToken(jwtFor(user))
    const data = response.body().data
    assert.equal(data.tier, 'free')
    assert.equal(data.agentLimit, 1)
    assert.isNull(data.subscriptionExpiresAt)
  })

  test('needs a JWT', async ({ client }) => {
    const response = await client.get('/features/account')
    response.assertStatus(401)
    response.assertBodyContains({ success: false, code: 'AUTH_REQUIRED' })
  })
})

test.group('Retired routes answer 410 GONE', () => {
  test('credit-based subscribe and add-on, and every /credits route whatever the method', async ({
    assert,
  }) => {
    const user = await createUser()
    const auth = { 'authorization': `Bearer ${jwtFor(user)}`, 'content-type': 'application/json' }
    const calls: [string, string][] = [
      ['POST', '/features/subscribe-with-credits'],
      ['POST', '/features/addon-with-credits'],
      ['GET', '/credits'],
      ['GET', '/credits/balance'],
      ['POST', '/credits/purchase'],
      ['PUT', '/credits/a/b/c'],
      ['PATCH', '/credits/x'],
      ['DELETE', '/credits/history/42'],
    ]
    for (const [method, path] of calls) {
      for (const headers of [auth, { 'content-type': 'application/json' }]) {
        const response = await fetch(`${baseUrl()}${path}`, {
          method,
          headers,
          body:
            method === 'GET' || method === 'DELETE'
              ? undefined
              : JSON.stringify({ tier: 'pro', billingPeriod: 'monthly' }),
        })
        assert.equal(response.status, 410, `${method} ${path}`)
        const body = (await response.json()) as any
        assert.equal(body.success, false)
        assert.equal(body.code, 'GONE')
        assert.match(body.error, /retired/i)
      }
    }
  })

  test('there is no cancel route', async ({ client }) => {
    const user = await createUser()
    const response = await client.post('/features/cancel').bearerToken(jwtFor(user))
    response.assertStatus(404)
  })
})
