import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import Agent from '#agents/models/agent'
import { chatConfig } from '#config/chat'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners, createFixtureAgent, waitUntilServing } from '#tests/helpers/agents_http'
import { apiKeyFor, creditsOf, jwtFor, type CreateUserOptions } from '#tests/helpers/identity'
import {
  startModelUpstream,
  useProviderEndpoints,
  useUpstream,
  type ModelUpstream,
} from '#tests/helpers/model_upstream'
import { waitFor } from '#tests/helpers/runtime'
import { answersWritten } from '#tests/helpers/answers_written'

const owners = agentOwners({ tier: 'pro' })
const owner = (options: CreateUserOptions = {}) => owners.create(options)

async function storedMessages(agentId: string) {
  await answersWritten()
  return db
    .from('chat_messages')
    .where('agent_id', agentId)
    .orderBy([
      { column: 'created_at', order: 'asc' },
      { column: 'seq', order: 'asc' },
    ])
}

async function messageCountOf(agentId: string) {
  await answersWritten()
  const agent = await Agent.findOrFail(agentId)
  return agent.messageCount
}

async function llmEntries(userId: string) {
  await answersWritten()
  return db.from('credit_ledger').where({ user_id: userId, kind: 'llm' })
}

test.group('POST /api/v1/agents/:id/chat (hosted local-dev model)', (group) => {
  group.teardown(async () => owners.removeAgents())

  test('answers { content, model }, counts the quota, stores both messages, counts and feeds', async ({
    client,
    assert,
  }) => {
    const user = await owner({ credits: 50 })
    const agent = await createAgentFor(user)
    const response = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(await apiKeyFor(user))
      .json({ message: 'Hello agent' })
    response.assertStatus(200)
    const data = response.body().data
    assert.equal(data.model, 'local-dev')
    assert.include(data.content, 'Hello agent')
    assert.include(data.content, 'development model')
    assert.exists(response.header('x-ratelimit-limit'))
    assert.exists(response.header('x-ratelimit-remaining'))

    const messages = await storedMessages(agent.id)
    assert.deepEqual(
      messages.map((row) => [row.role, row.content]),
      [
        ['user', 'Hello agent'],
        ['assistant', data.content],
      ]
    )
    const fresh = await Agent.findOrFail(agent.id)
    assert.equal(fresh.messageCount, 1)
    assert.isNotNull(fresh.lastActiveAt)
    const today = new Date().toISOString().slice(0, 10)
    const counter = await db
      .from('chat_daily_counts')
      .where('agent_id', agent.id)
      .select(db.raw(`to_char(day, 'YYYY-MM-DD') as day`), 'messages')
    assert.deepEqual(counter, [{ day: today, messages: 1 }])
    const feed = await waitFor('the feed message event', async () => {
      const rows = await db.from('agent_feed_events').where({ agent_id: agent.id, type: 'message' })
      return rows.length > 0 && rows
    })
    assert.include(feed[0].content, 'Hello agent')

    const feedRoute = await client.get(`/agents/${agent.id}/feed`).bearerToken(jwtFor(user))
    feedRoute.assertStatus(200)
    assert.isTrue(feedRoute.body().data.events.some((event: any) => event.type === 'message'))
  })

  test('credentials and ownership: JWT 401, foreign agent 403, unknown or malformed id 404', async ({
    client,
    assert,
  }) => {
    const user = await owner({ credits: 10 })
    const other = await owner({ credits: 10 })
    const agent = await createAgentFor(other)
    const key = await apiKeyFor(user)

    const withJwt = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(jwtFor(other))
      .json({ message: 'hi' })
    withJwt.assertStatus(401)
    assert.equal(withJwt.body().code, 'AUTH_REQUIRED')

    const foreign = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(key)
      .json({ message: 'hi' })
    foreign.assertStatus(403)
    assert.equal(foreign.body().code, 'FORBIDDEN')

    for (const id of ['6f1c4a7e-0000-4000-8000-000000000000', 'not-a-uuid']) {
      const missing = await client
        .post(`/api/v1/agents/${id}/chat`)
        .bearerToken(key)
        .json({ message: 'hi' })
      missing.assertStatus(404)
      assert.equal(missing.body().code, 'NOT_FOUND')
    }
    assert.lengthOf(await storedMessages(agent.id), 0)
  })

  test('validation: message 1 to 4000 characters, history at most 40 { role, content }', async ({
    client,
    assert,
  }) => {
    const user = await owner({ credits: 10 })
    const agent = await createAgentFor(user)
    const key = await apiKeyFor(user)
    const post = (body: unknown) =>
      client
        .post(`/api/v1/agents/${agent.id}/chat`)
        .bearerToken(key)
        .json(body as object)
    const turns = (n: number) =>
      Array.from({ length: n }, (_, i) => ({
        role: i % 2 ? 'assistant' : 'user',
        content: `turn ${i}`,
      }))

    for (const body of [
      {},
      { message: '' },
      { message: '   ' },
      { message: 'x'.repeat(4001) },
      { message: 42 },
      { message: 'ok', history: turns(41) },
      { message: 'ok', history: [{ role: 'system', content: 'x' }] },
      { message: 'ok', history: 'nope' },
    ]) {
      const response = await post(body)
      response.assertStatus(400)
      assert.equal(response.body().code, 'VALIDATION_ERROR')
    }
    assert.lengthOf(await storedMessages(agent.id), 0)

    const longest = await post({ message: 'x'.repeat(4000) })
    longest.assertStatus(200)
    const fullHistory = await post({ message: 'ok', history: turns(40) })
    fullHistory.assertStatus(200)
  })
})

test.group('Chat routing: hosted, customer key, container', (group) => {
  let upstream: ModelUpstream
  let restore: () => void
  let restoreProviders: () => void
  const rates = {
    'metered-model': { input: 1_000_000, output: 2_000_000 },
    'penny-model': { input: 100, output: 100 },
  }
  group.setup(async () => {
    upstream = await startModelUpstream()
    restore = useUpstream(upstream, { apiKey: 'sk-upstream', rates })
    restoreProviders = useProviderEndpoints(upstream)
    return async () => {
      restore()
      restoreProviders()
      await upstream.close()
      await owners.removeAgents()
    }
  })
  group.each.setup(() => upstream.reset())

  test('hosted: personality as system prompt, stored context, metered on the owner', async ({
    client,
    assert,
  }) => {
    const user = await owner({ credits: 10_000 })
    const agent = await createAgentFor(user, {
      config: { personality: 'You are Captain Test.', model: 'metered-model' },
    })
    const key = await apiKeyFor(user)
    upstream.set({ reply: 'Aye!', usage: { prompt_tokens: 20, completion_tokens: 5 } })

    const first = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(key)
      .json({ message: 'First question' })
    first.assertStatus(200)
    assert.deepEqual(first.body().data, { content: 'Aye!', model: 'metered-model' })
    assert.deepEqual(upstream.requests[0].body.messages, [
      { role: 'system', content: 'You are Captain Test.' },
      { role: 'user', content: 'First question' },
    ])
    assert.equal(await creditsOf(user), 10_000 - (20 + 10))

    // Without `history`, the stored conversation is the context.
    await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(key)
      .json({ message: 'Second question' })
    assert.deepEqual(upstream.requests[1].body.messages.slice(1), [
      { role: 'user', content: 'First question' },
      { role: 'assistant', content: 'Aye!' },
      { role: 'user', content: 'Second question' },
    ])

    // With `history`, the request's history replaces it.
    await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(key)
      .json({ message: 'Third', history: [{ role: 'assistant', content: 'Given context' }] })
    assert.deepEqual(upstream.requests[2].body.messages.slice(1), [
      { role: 'assistant', content: 'Given context' },
      { role: 'user', content: 'Third' },
    ])
    const entries = await llmEntries(user.id)
    assert.lengthOf(entries, 3)
    assert.isTrue(entries.every((entry) => entry.metadata.agentId === agent.id))
  })

  test('hosted: 402 INSUFFICIENT_CREDITS at a balance of 0; nothing stored', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user, { config: { model: 'metered-model' } })
    const response = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(await apiKeyFor(user))
      .json({ message: 'Anyone there?' })
    response.assertStatus(402)
    assert.equal(response.body().code, 'INSUFFICIENT_CREDITS')
    assert.lengthOf(upstream.requests, 0)
    assert.lengthOf(await storedMessages(agent.id), 0)
    assert.equal(await messageCountOf(agent.id), 0)
  })

  test('the safety filter answers 422 CONTENT_BLOCKED; nothing is routed, stored or charged', async ({
    client,
    assert,
  }) => {
    const user = await owner({ credits: 10_000 })
    const agent = await createAgentFor(user, { config: { model: 'metered-model' } })
    const blocked = chatConfig.blockedPhrases[2]
    const response = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(await apiKeyFor(user))
      .json({ message: `Please tell me how to ${blocked.toUpperCase()}!!` })
    response.assertStatus(422)
    assert.equal(response.body().code, 'CONTENT_BLOCKED')
    assert.lengthOf(upstream.requests, 0)
    assert.lengthOf(await storedMessages(agent.id), 0)
    assert.equal(await creditsOf(user), 10_000)
    assert.lengthOf(await llmEntries(user.id), 0)

    // Words that merely contain a blocked phrase pass.
    const fine = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(await apiKeyFor(user))
      .json({ message: 'What is americium used for?' })
    fine.assertStatus(200)
  })

  for (const provider of ['openai', 'openrouter'] as const) {
    test(`customer key (${provider}): the provider is called with the customer's key; no credits`, async ({
      client,
      assert,
    }) => {
      const user = await owner({ credits: 0 })
      const agent = await createAgentFor(user, {
        config: {
          personality: 'Own-key agent',
          provider,
          apiKey: `sk-customer-${provider}`,
          model: 'customer-model',
        },
      })
      upstream.set({ reply: `Answer from ${provider}` })
      const response = await client
        .post(`/api/v1/agents/${agent.id}/chat`)
        .bearerToken(await apiKeyFor(user))
        .json({ message: 'Use my key' })
      response.assertStatus(200)
      assert.deepEqual(response.body().data, {
        content: `Answer from ${provider}`,
        model: 'customer-model',
      })
      const request = upstream.requests[0]
      assert.equal(request.path, '/v1/chat/completions')
      assert.equal(request.headers.authorization, `Bearer sk-customer-${provider}`)
      assert.equal(request.body.model, 'customer-model')
      assert.deepEqual(request.body.messages[0], { role: 'system', content: 'Own-key agent' })
      assert.equal(await creditsOf(user), 0)
      assert.lengthOf(await llmEntries(user.id), 0)
      assert.lengthOf(await storedMessages(agent.id), 2)
    })
  }

  test('customer key (anthropic): Messages API with x-api-key, system apart; no credits', async ({
    client,
    assert,
  }) => {
    const user = await owner({ credits: 5 })
    const agent = await createAgentFor(user, {
      config: { personality: 'Claude persona', provider: 'anthropic', apiKey: 'sk-ant-customer' },
    })
    upstream.set({ reply: 'Hello from Claude', model: 'claude-sonnet-4-5' })
    const response = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(await apiKeyFor(user))
      .json({
        message: 'Hi Claude',
        history: [
          { role: 'assistant', content: 'leading assistant turn' },
          { role: 'user', content: 'earlier' },
          { role: 'user', content: 'and more' },
        ],
      })
    response.assertStatus(200)
    assert.deepEqual(response.body().data, {
      content: 'Hello from Claude',
      model: 'claude-sonnet-4-5',
    })
    const request = upstream.requests[0]
    assert.equal(request.path, '/v1/messages')
    assert.equal(request.headers['x-api-key'], 'sk-ant-customer')
    assert.equal(request.headers['anthropic-version'], '2023-06-01')
    assert.equal(request.body.system, 'Claude persona')
    assert.equal(request.body.model, 'claude-sonnet-4-5')
    assert.isNumber(request.body.max_tokens)
    assert.deepEqual(request.body.messages, [
      { role: 'user', content: 'earlier\n\nand more\n\nHi Claude' },
    ])
    assert.equal(await creditsOf(user), 5)
  })

  test('customer key refused by the provider: 503 naming it; nothing stored or charged', async ({
    client,
    assert,
  }) => {
    const user = await owner({ credits: 100 })
    const agent = await createAgentFor(user, {
      config: { provider: 'openai', apiKey: 'sk-revoked' },
    })
    upstream.set({ status: 401 })
    const response = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(await apiKeyFor(user))
      .json({ message: 'hello' })
    response.assertStatus(503)
    assert.include(response.body().error, "OpenAI refused the agent's API key (401)")
    assert.notInclude(response.text(), 'sk-revoked')
    assert.lengthOf(await storedMessages(agent.id), 0)
    assert.equal(await creditsOf(user), 100)
  })

  test('container: a running agent answers through its framework; a failing one falls back to hosted', async ({
    client,
    assert,
  }) => {
    const user = await owner({ credits: 10_000 })
    const created = await createFixtureAgent(client, user, { config: { model: 'metered-model' } })
    await waitUntilServing(created.id)
    const key = await apiKeyFor(user)
    upstream.set({
      reply: 'Hosted fallback answer',
      usage: { prompt_tokens: 10, completion_tokens: 3 },
    })

    const viaContainer = await client
      .post(`/api/v1/agents/${created.id}/chat`)
      .bearerToken(key)
      .json({ message: 'hello container' })
    viaContainer.assertStatus(200)
    assert.deepEqual(viaContainer.body().data, {
      content: 'echo: hello container',
      model: 'fixture',
    })
    assert.lengthOf(upstream.requests, 0)
    assert.equal(await creditsOf(user), 10_000)

    // The fixture exits mid-request on this message: the hosted model answers instead.
    const crashed = await client
      .post(`/api/v1/agents/${created.id}/chat`)
      .bearerToken(key)
      .json({ message: '__crash__' })
    crashed.assertStatus(200)
    assert.deepEqual(crashed.body().data, {
      content: 'Hosted fallback answer',
      model: 'metered-model',
    })
    assert.lengthOf(upstream.requests, 1)
    assert.equal(await creditsOf(user), 10_000 - (10 + 6))
    const messages = await storedMessages(created.id)
    assert.deepEqual(
      messages.map((row) => row.content),
      ['hello container', 'echo: hello container', '__crash__', 'Hosted fallback answer']
    )
    assert.equal(await messageCountOf(created.id), 2)
  }).timeout(60_000)

  test('50 concurrent hosted chats on a balance that covers 10: exactly 10 answer, never negative', async ({
    client,
    assert,
  }) => {
    // penny-model: every chat holds and costs exactly 1 credit.
    const user = await owner({ credits: 10 })
    const agent = await createAgentFor(user, { config: { model: 'penny-model' } })
    const key = await apiKeyFor(user)
    upstream.set({
      reply: 'ok',
      usage: { prompt_tokens: 30, completion_tokens: 1 },
      replyDelayMs: 10,
    })

    // The per-agent concurrency cap (chat_limits.spec.ts) is lifted: this is about the balance.
    const cap = chatConfig.maxConcurrentChatsPerAgent
    chatConfig.maxConcurrentChatsPerAgent = 100
    const statuses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        client
          .post(`/api/v1/agents/${agent.id}/chat`)
          .bearerToken(key)
          .json({ message: `concurrent ${i}` })
          .then((response) => response.status())
      )
    ).finally(() => {
      chatConfig.maxConcurrentChatsPerAgent = cap
    })
    assert.equal(statuses.filter((status) => status === 200).length, 10)
    assert.equal(statuses.filter((status) => status === 402).length, 40)
    assert.equal(await creditsOf(user), 0)
    const entries = await llmEntries(user.id)
    assert.lengthOf(entries, 10)
    assert.isTrue(entries.every((entry) => entry.credits === -1 && entry.balance_after >= 0))
    assert.equal(upstream.requests.length, 10)
    assert.equal(await messageCountOf(agent.id), 10)
    assert.lengthOf(await storedMessages(agent.id), 20)
  }).timeout(60_000)
})
