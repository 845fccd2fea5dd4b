import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { chatConfig } from '#config/chat'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners, createFixtureAgent, waitUntilServing } from '#tests/helpers/agents_http'
import { apiKeyFor, creditsOf, jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import {
  readSse,
  startModelUpstream,
  useProviderEndpoints,
  useUpstream,
  type ModelUpstream,
} from '#tests/helpers/model_upstream'
import { waitFor } from '#tests/helpers/runtime'
import { answersWritten } from '#tests/helpers/answers_written'

const owners = agentOwners({ tier: 'pro' })
const owner = (credits = 10_000) => owners.create({ credits })

function stream(
  agentId: string,
  token: string,
  body: unknown,
  init: { signal?: AbortSignal; headers?: Record<string, string> } = {}
) {
  return fetch(`${baseUrl()}/agents/${agentId}/chat/stream`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'authorization': `Bearer ${token}`,
      ...init.headers,
    },
    body: JSON.stringify(body),
    signal: init.signal,
  })
}

function tokensOf(events: string[]): string[] {
  return events
    .filter((event) => event !== '[DONE]')
    .map((event) => JSON.parse(event))
    .filter((event) => 'token' in event)
    .map((event) => event.token)
}

async function storedCount(agentId: string): Promise<number> {
  await answersWritten()
  const rows = await db.from('chat_messages').where('agent_id', agentId)
  return rows.length
}

const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ')

test.group('POST /agents/:id/chat/stream', (group) => {
  let upstream: ModelUpstream
  let restore: () => void
  let restoreProviders: () => void
  group.setup(async () => {
    upstream = await startModelUpstream()
    restore = useUpstream(upstream, {
      rates: { 'metered-model': { input: 1_000_000, output: 2_000_000 } },
    })
    restoreProviders = useProviderEndpoints(upstream)
    return async () => {
      restore()
      restoreProviders()
      await upstream.close()
      await owners.removeAgents()
    }
  })
  group.each.setup(() => {
    upstream.reset()
    const heartbeat = chatConfig.sseHeartbeatMs
    return () => {
      chatConfig.sseHeartbeatMs = heartbeat
    }
  })

  test('streams token events as they are generated, then [DONE]; unbuffered headers', async ({
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user, { config: { model: 'metered-model' } })
    upstream.set({
      reply: 'alpha beta gamma delta',
      tokenDelayMs: 150,
      usage: { prompt_tokens: 10, completion_tokens: 4 },
    })
    const started = Date.now()
    const response = await stream(agent.id, jwtFor(user), { message: 'Stream it' })
    assert.equal(response.status, 200)
    assert.match(response.headers.get('content-type')!, /^text\/event-stream/)
    assert.equal(response.headers.get('x-accel-buffering'), 'no')
    assert.match(response.headers.get('cache-control')!, /no-cache/)
    assert.exists(response.headers.get('x-request-id'))

    const arrivals: number[] = []
    const { events } = await readSse(response, () => {
      arrivals.push(Date.now() - started)
    })
    assert.equal(events.at(-1), '[DONE]')
    assert.deepEqual(tokensOf(events), ['alpha ', 'beta ', 'gamma ', 'delta'])
    // Each token was written when generated, not buffered until the end.
    assert.isBelow(arrivals[0], arrivals[3] - 300)

    assert.equal(await storedCount(agent.id), 2)
    assert.equal(await creditsOf(user), 10_000 - (10 + 8))
  })

  test('a failure after the stream began: data {"error"} then [DONE]; nothing stored', async ({
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user, { config: { model: 'metered-model' } })
    upstream.set({ reply: 'one two three four', failAfterTokens: 2 })
    const response = await stream(agent.id, jwtFor(user), { message: 'Fail midway' })
    assert.equal(response.status, 200)
    const { events } = await readSse(response)
    assert.deepEqual(tokensOf(events), ['one ', 'two '])
    const error = JSON.parse(events.at(-2)!)
    assert.deepEqual(Object.keys(error), ['error'])
    assert.include(error.error, 'stand-in failure mid-stream')
    assert.equal(events.at(-1), '[DONE]')
    assert.equal(await storedCount(agent.id), 0)
  })

  test('a client disconnect cancels the upstream call and charges only what was generated', async ({
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user, { config: { model: 'metered-model' } })
    // Reported at the end only: 10 + 60 x 2 = 130 credits for the whole answer.
    upstream.set({
      reply: words(60),
      tokenDelayMs: 100,
      usage: { prompt_tokens: 10, completion_tokens: 60 },
    })
    const controller = new AbortController()
    const response = await stream(
      agent.id,
      jwtFor(user),
      { message: 'Say many words' },
      { signal: controller.signal }
    )
    await readSse(response, (_data, index) => (index === 1 ? 'stop' : undefined)).catch(() => {})
    controller.abort()

    await waitFor('the upstream to see its client go', () => upstream.closedEarly === 1)
    const entry = await waitFor('the cut-short charge', async () => {
      const rows = await db.from('credit_ledger').where({ user_id: user.id, kind: 'llm' })
      return rows.length > 0 && rows[0]
    })
    assert.isTrue(entry.metadata.cutShort)
    assert.isBelow(entry.output_tokens, 20)
    const charged = 10_000 - (await creditsOf(user))
    assert.equal(charged, -entry.credits)
    assert.isAbove(charged, 0)
    assert.isBelow(charged, 130)
    assert.lengthOf(await db.from('chat_credit_holds').where('user_id', user.id), 0)
    assert.equal(await storedCount(agent.id), 0)
  }).timeout(20_000)

  test('failures before the stream begins are JSON errors (401, 403, 400, 422, 402)', async ({
    assert,
  }) => {
    const user = await owner()
    const poor = await owner(0)
    const agent = await createAgentFor(user, { config: { model: 'metered-model' } })
    const poorAgent = await createAgentFor(poor, { config: { model: 'metered-model' } })

    const cases: [string, string, unknown, number, string][] = [
      [agent.id, await apiKeyFor(user), { message: 'hi' }, 401, 'AUTH_REQUIRED'],
      [agent.id, jwtFor(poor), { message: 'hi' }, 403, 'FORBIDDEN'],
      [agent.id, jwtFor(user), { message: '' }, 400, 'VALIDATION_ERROR'],
      [agent.id, jwtFor(user), { message: chatConfig.blockedPhrases[0] }, 422, 'CONTENT_BLOCKED'],
      [poorAgent.id, jwtFor(poor), { message: 'hi' }, 402, 'INSUFFICIENT_CREDITS'],
    ]
    for (const [agentId, token, body, status, code] of cases) {
      const response = await stream(agentId, token, body)
      assert.equal(response.status, status)
      assert.match(response.headers.get('content-type')!, /application\/json/)
      assert.deepInclude(await response.json(), { success: false, code })
    }
    assert.lengthOf(upstream.requests, 0)
  })

  test('a comment heartbeat keeps a slow stream alive', async ({ assert }) => {
    chatConfig.sseHeartbeatMs = 60
    const user = await owner()
    const agent = await createAgentFor(user, { config: { model: 'metered-model' } })
    upstream.set({ reply: 'slow reply here', tokenDelayMs: 200 })
    const response = await stream(agent.id, jwtFor(user), { message: 'slowly' })
    const { events, comments } = await readSse(response)
    assert.equal(events.at(-1), '[DONE]')
    assert.isAtLeast(comments.filter((comment) => comment === 'heartbeat').length, 3)
  })

  test('customer Anthropic key: its stream events become token events; no credits', async ({
    assert,
  }) => {
    const user = await owner(0)
    const agent = await createAgentFor(user, {
      config: { provider: 'anthropic', apiKey: 'sk-ant-stream', model: 'claude-haiku-4-5' },
    })
    upstream.set({ reply: 'Claude streams too', usage: { prompt_tokens: 5, completion_tokens: 3 } })
    const response = await stream(agent.id, jwtFor(user), { message: 'hi' })
    assert.equal(response.status, 200)
    const { events } = await readSse(response)
    assert.deepEqual(tokensOf(events), ['Claude ', 'streams ', 'too'])
    assert.equal(events.at(-1), '[DONE]')
    assert.equal(upstream.requests[0].path, '/v1/messages')
    assert.isTrue(upstream.requests[0].body.stream)
    assert.equal(await creditsOf(user), 0)
  })

  test('a running container streams through its framework', async ({ client, assert }) => {
    const user = await owner()
    const created = await createFixtureAgent(client, user)
    await waitUntilServing(created.id)
    const response = await stream(created.id, jwtFor(user), { message: 'stream from container' })
    const { events } = await readSse(response)
    assert.equal(tokensOf(events).join(''), 'echo: stream from container')
    assert.equal(events.at(-1), '[DONE]')
    assert.lengthOf(upstream.requests, 0)
  }).timeout(60_000)
})

test.group('POST /agents/test-chat', (group) => {
  let upstream: ModelUpstream
  let restore: () => void
  group.setup(async () => {
    upstream = await startModelUpstream({ reply: 'Arr, matey!' })
    restore = useUpstream(upstream, {
      defaultModel: 'metered-model',
      rates: { 'metered-model': { input: 1_000_000, output: 2_000_000 } },
    })
    return async () => {
      restore()
      await upstream.close()
    }
  })
  group.each.setup(() => upstream.reset())

  test('answers { text } through the hosted model, charging the user', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    upstream.set({ usage: { prompt_tokens: 12, completion_tokens: 2 } })
    const response = await client
      .post('/agents/test-chat')
      .bearerToken(jwtFor(user))
      .json({ message: 'Who are you?', systemPrompt: 'You are a pirate.' })
    response.assertStatus(200)
    assert.deepEqual(response.body().data, { text: 'Arr, matey!' })
    assert.deepEqual(upstream.requests[0].body.messages, [
      { role: 'system', content: 'You are a pirate.' },
      { role: 'user', content: 'Who are you?' },
    ])
    assert.equal(await creditsOf(user), 10_000 - (12 + 4))
  })

  test('402 at a balance of 0; 401 without a JWT; 400 without a message', async ({
    client,
    assert,
  }) => {
    const poor = await owner(0)
    const noCredits = await client
      .post('/agents/test-chat')
      .bearerToken(jwtFor(poor))
      .json({ message: 'hi', systemPrompt: 'x' })
    noCredits.assertStatus(402)
    assert.equal(noCredits.body().code, 'INSUFFICIENT_CREDITS')
    const anonymous = await client.post('/agents/test-chat').json({ message: 'hi' })
    anonymous.assertStatus(401)
    const invalid = await client
      .post('/agents/test-chat')
      .bearerToken(jwtFor(poor))
      .json({ systemPrompt: 'x' })
    invalid.assertStatus(400)
    assert.lengthOf(upstream.requests, 0)
  })
})
