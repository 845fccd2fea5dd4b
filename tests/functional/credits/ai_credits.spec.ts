import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { randomUUID } from 'node:crypto'
import { tiers } from '#config/plans'
import creditLedger from '#credits/services/credit_ledger'
import { createUser, creditsOf, jwtFor } from '#tests/helpers/identity'

test.group('AI Credits: balance and history', () => {
  test('balance answers balance, monthly grant and tier', async ({ client, assert }) => {
    const free = await createUser({ credits: 42 })
    const response = await client.get('/ai-credits/balance').bearerToken(jwtFor(free))
    response.assertStatus(200)
    assert.deepEqual(response.body().data, {
      balance: 42,
      monthlyGrant: tiers.free.aiCreditsMonthly,
      tier: 'free',
    })

    const pro = await createUser({ tier: 'pro' })
    const proBalance = await client.get('/ai-credits/balance').bearerToken(jwtFor(pro))
    assert.deepEqual(proBalance.body().data, {
      balance: 0,
      monthlyGrant: tiers.pro.aiCreditsMonthly,
      tier: 'pro',
    })
  })

  test('history lists ledger entries newest first, with usage fields', async ({
    client,
    assert,
  }) => {
    const user = await createUser({ credits: 1000 })
    await creditLedger.debit(user.id, 12, {
      kind: 'llm',
      provider: 'openai',
      model: 'gpt-4o-mini',
      inputTokens: 820,
      outputTokens: 140,
    })
    const response = await client.get('/ai-credits/history').bearerToken(jwtFor(user))
    response.assertStatus(200)
    const usage = response.body().data.usage
    // The starting grant is not usage.
    assert.lengthOf(usage, 1)
    assert.deepInclude(usage[0], {
      kind: 'llm',
      provider: 'openai',
      model: 'gpt-4o-mini',
      credits: 12,
      inputTokens: 820,
      outputTokens: 140,
    })
    assert.equal(new Date(usage[0].createdAt).toISOString(), usage[0].createdAt)
    for (const field of [
      'kind',
      'provider',
      'model',
      'credits',
      'inputTokens',
      'outputTokens',
      'createdAt',
    ]) {
      assert.property(usage[0], field)
    }
  })

  test('history limit: default 20, 1 to 100, 400 outside', async ({ client, assert }) => {
    const user = await createUser()
    await creditLedger.credit(user.id, 100, { kind: 'grant', reason: 'start' })
    for (let i = 0; i < 25; i++) {
      await creditLedger.debit(user.id, 1, { kind: 'llm', model: `m${i}` })
    }
    const jwt = jwtFor(user)
    const byDefault = await client.get('/ai-credits/history').bearerToken(jwt)
    assert.lengthOf(byDefault.body().data.usage, 20)
    assert.equal(byDefault.body().data.usage[0].model, 'm24')
    const one = await client.get('/ai-credits/history').qs({ limit: 1 }).bearerToken(jwt)
    assert.lengthOf(one.body().data.usage, 1)
    const hundred = await client.get('/ai-credits/history').qs({ limit: 100 }).bearerToken(jwt)
    assert.lengthOf(hundred.body().data.usage, 25)

    for (const limit of ['0', '101', '-5', '2.5', 'abc']) {
      const response = await client.get('/ai-credits/history').qs({ limit }).bearerToken(jwt)
      response.assertStatus(400)
      assert.equal(response.body().code, 'VALIDATION_ERROR')
      assert.include(response.body().error, 'limit')
    }
  })

  test('only the caller’s own debits are listed; grants, purchases and rewards are not usage', async ({
    client,
    assert,
  }) => {
    const mine = await createUser({ credits: 50 })
    const other = await createUser({ credits: 70 })
    await creditLedger.debit(other.id, 7, { kind: 'llm', model: 'gpt-4o' })
    const before = await client.get('/ai-credits/history').bearerToken(jwtFor(mine))
    assert.deepEqual(before.body().data.usage, [])
    await creditLedger.debit(mine.id, 5, { kind: 'llm', model: 'gpt-4o' })
    await creditLedger.credit(mine.id, 500, { kind: 'referral', reason: 'reward' })
    const response = await client.get('/ai-credits/history').bearerToken(jwtFor(mine))
    assert.deepEqual(
      response.body().data.usage.map((u: any) => [u.kind, u.credits]),
      [['llm', 5]]
    )
  })
})

test.group('AI Credits: free usage is not a debit', () => {
  test('a local-dev answer (no MODEL_API_URL) leaves no ledger entry and nothing in the history', async ({
    client,
    assert,
  }) => {
    const user = await createUser({ credits: 40 })
    const jwt = jwtFor(user)
    const chat = await client
      .post('/agents/test-chat')
      .bearerToken(jwt)
      .json({ message: 'Are you free?', systemPrompt: 'Be brief.' })
    chat.assertStatus(200)
    assert.include(chat.body().data.text, 'local-dev')
    const history = await client.get('/ai-credits/history').bearerToken(jwt)
    history.assertStatus(200)
    assert.deepEqual(history.body().data.usage, [])
    assert.lengthOf(await db.from('credit_ledger').where({ user_id: user.id, kind: 'llm' }), 0)
    assert.equal(await creditsOf(user), 40)
  })
})

test.group('AI Credits: grant', () => {
  test('an admin grants credits; the ledger names the admin and the reason', async ({
    client,
    assert,
  }) => {
    const admin = await createUser({ role: 'admin' })
    const user = await createUser({ credits: 100 })
    const response = await client
      .post('/ai-credits/grant')
      .bearerToken(jwtFor(admin))
      .json({ userId: user.id, credits: 250, reason: 'Goodwill after an outage' })
    response.assertStatus(200)
    const data = response.body().data
    assert.equal(data.userId, user.id)
    assert.equal(data.credits, 250)
    assert.equal(data.balance, 350)
    assert.equal(data.grantedBy, admin.id)

    assert.equal(await creditsOf(user), 350)
    const entry = await db.from('credit_ledger').where('id', data.id).first()
    assert.equal(entry.user_id, user.id)
    assert.equal(entry.kind, 'grant')
    assert.equal(entry.credits, 250)
    assert.equal(entry.balance_after, 350)
    assert.equal(entry.actor_id, admin.id)
    assert.equal(entry.reason, 'Goodwill after an outage')

    const notes = await client.get('/auth/notifications').bearerToken(jwtFor(user))
    assert.isTrue(notes.body().data.notifications.some((n: any) => n.type === 'ai_credits_granted'))
  })

  test('user, support and operator cannot grant: 403 FORBIDDEN, nothing changes', async ({
    client,
    assert,
  }) => {
    for (const role of ['user', 'support', 'operator'] as const) {
      const caller = await createUser({ role })
      const target = await createUser()
      const response = await client
        .post('/ai-credits/grant')
        .bearerToken(jwtFor(caller))
        .json({ userId: target.id, credits: 100, reason: 'please' })
      response.assertStatus(403)
      assert.equal(response.body().code, 'FORBIDDEN')
      assert.equal(await creditsOf(target), 0)
      const self = await client
        .post('/ai-credits/grant')
        .bearerToken(jwtFor(caller))
        .json({ userId: caller.id, credits: 100, reason: 'myself' })
      self.assertStatus(403)
    }
  })

  test('grant input is validated', async ({ client, assert }) => {
    const admin = await createUser({ role: 'admin' })
    const target = await createUser()
    const jwt = jwtFor(admin)
    const bad = [
      { userId: target.id, credits: 0, reason: 'x' },
      { userId: target.id, credits: -5, reason: 'x' },
      { userId: target.id, credits: 1.5, reason: 'x' },
      { userId: target.id, credits: 10 },
      { userId: 'not-a-uuid', credits: 10, reason: 'x' },
    ]
    for (const body of bad) {
      const response = await client.post('/ai-credits/grant').bearerToken(jwt).json(body)
      response.assertStatus(400)
      assert.equal(response.body().code, 'VALIDATION_ERROR')
    }
    const unknown = await client
      .post('/ai-credits/grant')
      .bearerToken(jwt)
      .json({ userId: randomUUID(), credits: 10, reason: 'x' })
    unknown.assertStatus(404)
  })

  test('the routes need a JWT', async ({ client }) => {
    const responses = [
      await client.get('/ai-credits/balance'),
      await client.get('/ai-credits/history'),
      await client.post('/ai-credits/grant').json({}),
    ]
    for (const response of responses) response.assertStatus(401)
  })
})
