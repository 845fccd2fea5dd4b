import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { ConsoleVisitor } from '#tests/helpers/console'
import { createUser, jwtFor } from '#tests/helpers/identity'
import { agentOwners, createFixtureAgent } from '#tests/helpers/agents_http'

test.group('Console: operators set an account plan (no payment)', (group) => {
  const owners = agentOwners()
  group.teardown(() => owners.removeAgents())

  test("the free plan's limit says how to get more where payments are off; an operator's plan lifts it, audited with its reason", async ({
    assert,
    client,
  }) => {
    const operator = await createUser({ role: 'operator' })
    const owner = await owners.create()
    const jwt = jwtFor(owner)
    await createFixtureAgent(client, owner)
    const refused = await client
      .post('/agents')
      .bearerToken(jwt)
      .json({ name: 'Second', framework: 'fixture' })
    refused.assertStatus(400)
    assert.equal(refused.body().code, 'VALIDATION_ERROR')
    assert.include(refused.body().error, 'an operator can set your plan in the console')

    const visitor = await ConsoleVisitor.signedIn(operator)
    const page = await visitor.get(`/console/accounts/${owner.id}`)
    assert.include(page.html, 'id="plan-form"')
    const until = new Date(Date.now() + 40 * 86_400_000).toISOString().slice(0, 10)
    const answer = await visitor.post(`/console/accounts/${owner.id}/plan`, {
      tier: 'pro',
      until,
      reason: 'pilot customer, no payments yet',
    })
    assert.equal(answer.status, 302)
    const after = await visitor.get(`/console/accounts/${owner.id}`)
    assert.include(after.html, 'Plan set to pro')

    const features = await client.get('/features/account').bearerToken(jwt)
    features.assertStatus(200)
    assert.equal(features.body().data.tier, 'pro')
    assert.equal(features.body().data.agentLimit, 3)
    assert.equal(features.body().data.subscriptionExpiresAt.slice(0, 10), until)
    const second = await client
      .post('/agents')
      .bearerToken(jwt)
      .json({ name: 'Second', framework: 'fixture' })
    second.assertStatus(201)

    const entry = await db
      .from('audit_entries')
      .where({ action: 'account.set_plan', target_id: owner.id })
      .firstOrFail()
    assert.equal(entry.actor_email, operator.email)
    assert.deepInclude(entry.before, { tier: 'free' })
    assert.deepInclude(entry.after, { tier: 'pro', reason: 'pilot customer, no payments yet' })
  }).timeout(60_000)

  test('support may not set a plan; a bad tier, a past end or no reason is a 400 page', async ({
    assert,
  }) => {
    const target = await createUser()
    const support = await ConsoleVisitor.signedIn(await createUser({ role: 'support' }))
    await support.get(`/console/accounts/${target.id}`)
    const forged = await support.post(`/console/accounts/${target.id}/plan`, {
      tier: 'business',
      reason: 'forged',
    })
    assert.equal(forged.status, 403)

    const operator = await ConsoleVisitor.signedIn(await createUser({ role: 'operator' }))
    const badForms: Record<string, string>[] = [
      { tier: 'platinum', reason: 'no such tier' },
      { tier: 'pro', until: '2001-01-01', reason: 'in the past' },
      { tier: 'pro' },
    ]
    for (const fields of badForms) {
      await operator.get(`/console/accounts/${target.id}`)
      const answer = await operator.post(`/console/accounts/${target.id}/plan`, fields)
      assert.equal(answer.status, 400, JSON.stringify(fields))
    }
    const row = await db.from('users').where('id', target.id).firstOrFail()
    assert.equal(row.tier, 'free')
  })
})
