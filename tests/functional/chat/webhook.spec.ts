import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { appUrl } from '#config/app'
import { chatConfig } from '#config/chat'
import { webhookTokenOf } from '#agents/services/agent_tokens'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners } from '#tests/helpers/agents_http'
import { jwtFor } from '#tests/helpers/identity'
import { waitFor } from '#tests/helpers/runtime'
import { answersWritten } from '#tests/helpers/answers_written'

const owners = agentOwners({ tier: 'pro', credits: 100 })
const owner = () => owners.create()

test.group('Inbound webhook', (group) => {
  group.teardown(async () => owners.removeAgents())

  test('GET /agents/:id/webhook-url answers the URL with a secret per-agent token', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const other = await createAgentFor(user)
    const response = await client.get(`/agents/${agent.id}/webhook-url`).bearerToken(jwtFor(user))
    response.assertStatus(200)
    const data = response.body().data
    assert.deepEqual(data, {
      webhookUrl: `${appUrl}/webhooks/in/${webhookTokenOf(agent)}`,
      method: 'POST',
      body: { message: 'string' },
    })
    const token = data.webhookUrl.split('/webhooks/in/')[1]
    // 256 random bits, base64url, behind a prefix.
    assert.match(token, /^whk_[A-Za-z0-9_-]{43}$/)
    const otherUrl = await client.get(`/agents/${other.id}/webhook-url`).bearerToken(jwtFor(user))
    assert.notEqual(otherUrl.body().data.webhookUrl, data.webhookUrl)

    const stranger = await owner()
    const foreign = await client
      .get(`/agents/${agent.id}/webhook-url`)
      .bearerToken(jwtFor(stranger))
    foreign.assertStatus(403)
    const anonymous = await client.get(`/agents/${agent.id}/webhook-url`)
    anonymous.assertStatus(401)
  })

  test('POST /webhooks/in/<token> { message } chats without other credentials', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const response = await client
      .post(`/webhooks/in/${webhookTokenOf(agent)}`)
      .json({ message: 'Order 1234 shipped' })
    response.assertStatus(200)
    assert.equal(response.body().data.model, 'local-dev')
    assert.include(response.body().data.content, 'Order 1234 shipped')
    await answersWritten()
    const stored = await db.from('chat_messages').where('agent_id', agent.id)
    assert.lengthOf(stored, 2)
    await waitFor('the feed message event', async () => {
      const feed = await db.from('agent_feed_events').where({ agent_id: agent.id, type: 'message' })
      return feed.some((event) => event.content.includes('webhook'))
    })
  })

  test('an unknown or malformed token is 404; a bad body is 400', async ({ client, assert }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    for (const token of ['whk_doesnotexist', 'anything', webhookTokenOf(agent).slice(0, -1)]) {
      const response = await client.post(`/webhooks/in/${token}`).json({ message: 'hi' })
      response.assertStatus(404)
      assert.equal(response.body().code, 'NOT_FOUND')
    }
    const invalid = await client.post(`/webhooks/in/${webhookTokenOf(agent)}`).json({ text: 'hi' })
    invalid.assertStatus(400)
    assert.equal(invalid.body().code, 'VALIDATION_ERROR')
  })

  test('rate limited per token: 429 past the limit, other agents unaffected', async ({
    client,
    assert,
  }) => {
    const previous = { ...chatConfig.webhookRateLimit }
    chatConfig.webhookRateLimit = { requests: 3, duration: '1 minute' }
    try {
      const user = await owner()
      const agent = await createAgentFor(user)
      const other = await createAgentFor(user)
      const statuses: number[] = []
      for (let i = 0; i < 5; i++) {
        const response = await client
          .post(`/webhooks/in/${webhookTokenOf(agent)}`)
          .json({ message: `event ${i}` })
        statuses.push(response.status())
        if (response.status() === 429) assert.equal(response.body().code, 'RATE_LIMIT_EXCEEDED')
      }
      assert.deepEqual(statuses, [200, 200, 200, 429, 429])
      const otherAgent = await client
        .post(`/webhooks/in/${webhookTokenOf(other)}`)
        .json({ message: 'still fine' })
      otherAgent.assertStatus(200)
    } finally {
      chatConfig.webhookRateLimit = previous
    }
  })
})
