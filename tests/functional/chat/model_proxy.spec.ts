import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import OpenAI from 'openai'
import { proxyTokenOf } from '#agents/services/agent_tokens'
import { LOCAL_DEV_NOTICE } from '#chat/services/local_dev_model'
import { releaseExpiredHolds } from '#credits/services/credit_holds'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { apiKeyFor, createUser, creditsOf, jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import {
  proxyCompletions as completions,
  readSse,
  upstreamForGroup,
  useUpstream,
} from '#tests/helpers/model_upstream'
import { WARM_UP_REPLY, warmUpRequest } from '#runtime/warm_up'

/** 1 credit per input token, 2 per output token: costs are easy to check by hand. */
const METERED = { 'metered-model': { input: 1_000_000, output: 2_000_000 } }

async function proxyAgent(credits: number) {
  const owner = await createUser({ credits })
  const agent = await createAgentFor(owner)
  return { owner, agent, token: proxyTokenOf(agent) }
}

async function llmEntries(userId: string) {
  return db.from('credit_ledger').where({ user_id: userId, kind: 'llm' }).orderBy('seq', 'asc')
}

test.group('Model proxy: built-in local-dev model (no MODEL_API_URL)', () => {
  test('answers deterministically, names itself local-dev, says it is a development model, costs nothing', async ({
    assert,
  }) => {
    const { owner, token } = await proxyAgent(100)
    const body = { model: 'gpt-4o', messages: [{ role: 'user', content: 'Ping me back' }] }
    const first = await completions(token, body)
    assert.equal(first.status, 200)
    const json: any = await first.json()
    assert.notProperty(json, 'success')
    assert.equal(json.object, 'chat.completion')
    assert.equal(json.model, 'local-dev')
    const content: string = json.choices[0].message.content
    assert.include(content, LOCAL_DEV_NOTICE)
    assert.include(content.toLowerCase(), 'development model')
    assert.include(content, 'Ping me back')
    assert.isAbove(json.usage.prompt_tokens, 0)

    const again = await completions(token, body)
    const second: any = await again.json()
    assert.equal(second.choices[0].message.content, content)

    // Free: no debit at all (the ledger and the usage history hold no zero-credit entries).
    assert.equal(await creditsOf(owner), 100)
    assert.lengthOf(await llmEntries(owner.id), 0)
    assert.lengthOf(await db.from('credit_ledger').where({ user_id: owner.id, credits: 0 }), 0)
    assert.lengthOf(await db.from('chat_credit_holds').where('user_id', owner.id), 0)
  })

  test('streams local-dev chunks, each named local-dev, ending with [DONE]', async ({ assert }) => {
    const { token } = await proxyAgent(10)
    const response = await completions(token, {
      messages: [{ role: 'user', content: 'Stream please' }],
      stream: true,
    })
    assert.equal(response.status, 200)
    assert.match(response.headers.get('content-type')!, /^text\/event-stream/)
    const { events } = await readSse(response)
    assert.equal(events.at(-1), '[DONE]')
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event))
    assert.isTrue(chunks.every((chunk) => chunk.model === 'local-dev'))
    // The usage chunk is only sent to clients that asked for it.
    assert.isTrue(chunks.every((chunk) => chunk.choices.length > 0))
    const text = chunks.map((chunk) => chunk.choices[0].delta.content ?? '').join('')
    assert.include(text, LOCAL_DEV_NOTICE)
  })

  test("quotes what the user typed, not the framework's context wrapped around it", async ({
    assert,
  }) => {
    const { token } = await proxyAgent(10)
    const wrapped = [
      '<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>',
      'Conversation info (untrusted metadata): {"channel":"webchat","sender":"owner"}',
      '<<<END_OPENCLAW_INTERNAL_CONTEXT>>>',
      'What is the capital of France?',
    ].join('\n')
    const response = await completions(token, {
      messages: [
        { role: 'user', content: 'an older question' },
        { role: 'assistant', content: 'an older answer' },
        { role: 'user', content: [{ type: 'text', text: wrapped }] },
      ],
    })
    const content: string = ((await response.json()) as any).choices[0].message.content
    assert.equal(content, `${LOCAL_DEV_NOTICE} You said: "What is the capital of France?"`)
    assert.notInclude(content, 'OPENCLAW')
    assert.notInclude(content, 'metadata')
  })

  test('GET /v1/models lists local-dev', async ({ assert }) => {
    const { token } = await proxyAgent(1)
    const response = await fetch(`${baseUrl()}/v1/models`, {
      headers: { authorization: `Bearer ${token}` },
    })
    assert.equal(response.status, 200)
    const json: any = await response.json()
    assert.equal(json.object, 'list')
    assert.deepEqual(
      json.data.map((model: any) => model.id),
      ['local-dev']
    )
  })

  test('a proxy token or an API key is accepted: missing, unknown and JWT get 401', async ({
    assert,
  }) => {
    const { owner } = await proxyAgent(10)
    const body = { messages: [{ role: 'user', content: 'hi' }] }
    const noToken = await fetch(`${baseUrl()}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    assert.equal(noToken.status, 401)
    assert.deepInclude(await noToken.json(), { success: false, code: 'AUTH_REQUIRED' })
    for (const token of ['apx_unknown-token', 'hk_unknown-key', jwtFor(owner)]) {
      const response = await completions(token, body)
      assert.equal(response.status, 401)
    }
    const withKey = await completions(await apiKeyFor(owner), body)
    assert.equal(withKey.status, 200)
    const models = await fetch(`${baseUrl()}/v1/models`)
    assert.equal(models.status, 401)
  })

  test('a body without messages is a 400', async ({ assert }) => {
    const { token } = await proxyAgent(10)
    const response = await completions(token, { model: 'x' })
    assert.equal(response.status, 400)
    assert.deepInclude(await response.json(), { code: 'VALIDATION_ERROR' })
  })
})

test.group('Model proxy: forwarding to MODEL_API_URL and metering', (group) => {
  const upstream = upstreamForGroup(group, { apiKey: 'sk-upstream-123', rates: METERED })

  test('forwards with MODEL_API_KEY and debits exactly the reported usage at the model rate', async ({
    assert,
    client,
  }) => {
    const { owner, agent, token } = await proxyAgent(5000)
    upstream.set({ reply: 'Metered answer', usage: { prompt_tokens: 50, completion_tokens: 20 } })
    const response = await completions(token, {
      model: 'metered-model',
      messages: [{ role: 'user', content: 'Count me' }],
      temperature: 0.2,
    })
    assert.equal(response.status, 200)
    const json: any = await response.json()
    assert.equal(json.choices[0].message.content, 'Metered answer')
    assert.equal(json.model, 'metered-model')

    assert.lengthOf(upstream.requests, 1)
    const forwarded = upstream.requests[0]
    assert.equal(forwarded.path, '/v1/chat/completions')
    assert.equal(forwarded.headers.authorization, 'Bearer sk-upstream-123')
    assert.equal(forwarded.body.model, 'metered-model')
    assert.equal(forwarded.body.temperature, 0.2)
    assert.isFalse(forwarded.body.stream)

    // 50 x 1 + 20 x 2 = 90 credits; the hold (larger) was returned.
    assert.equal(await creditsOf(owner), 5000 - 90)
    const entries = await llmEntries(owner.id)
    assert.lengthOf(entries, 1)
    assert.deepInclude(entries[0], {
      credits: -90,
      model: 'metered-model',
      provider: '127.0.0.1',
      input_tokens: 50,
      output_tokens: 20,
      balance_after: 4910,
    })
    assert.equal(entries[0].metadata.agentId, agent.id)
    const open = await db.from('chat_credit_holds').where('user_id', owner.id)
    assert.lengthOf(open, 0)

    const history = await client.get('/ai-credits/history').bearerToken(jwtFor(owner))
    history.assertStatus(200)
    assert.deepInclude(history.body().data.usage[0], {
      kind: 'llm',
      provider: '127.0.0.1',
      model: 'metered-model',
      credits: 90,
      inputTokens: 50,
      outputTokens: 20,
    })
    assert.isString(history.body().data.usage[0].createdAt)
  })

  test('streaming: asks the upstream for usage, relays chunks, meters the usage chunk', async ({
    assert,
  }) => {
    const { owner, token } = await proxyAgent(5000)
    upstream.set({ reply: 'one two three', usage: { prompt_tokens: 7, completion_tokens: 3 } })
    const response = await completions(token, {
      model: 'metered-model',
      messages: [{ role: 'user', content: 'stream' }],
      stream: true,
    })
    assert.equal(response.status, 200)
    assert.equal(response.headers.get('x-accel-buffering'), 'no')
    const { events } = await readSse(response)
    assert.equal(events.at(-1), '[DONE]')
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event))
    assert.equal(
      chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join(''),
      'one two three'
    )
    // The client did not ask for usage: the usage-only chunk is not relayed.
    assert.isTrue(chunks.every((chunk) => chunk.choices.length > 0))

    assert.deepEqual(upstream.requests[0].body.stream_options, { include_usage: true })
    assert.equal(await creditsOf(owner), 5000 - (7 + 3 * 2))
    const [entry] = await llmEntries(owner.id)
    assert.deepInclude(entry, { credits: -13, input_tokens: 7, output_tokens: 3 })
  })

  test('a client that asks for usage gets the usage chunk', async ({ assert }) => {
    const { token } = await proxyAgent(5000)
    upstream.set({ usage: { prompt_tokens: 4, completion_tokens: 2 } })
    const response = await completions(token, {
      model: 'metered-model',
      messages: [{ role: 'user', content: 'usage please' }],
      stream: true,
      stream_options: { include_usage: true },
    })
    const { events } = await readSse(response)
    const usageChunk = events
      .slice(0, -1)
      .map((event) => JSON.parse(event))
      .find((chunk) => chunk.choices.length === 0)
    assert.deepInclude(usageChunk.usage, { prompt_tokens: 4, completion_tokens: 2 })
  })

  test("the runtime's warm-up turn is answered by the proxy itself: never upstream, free, whole or streamed", async ({
    assert,
  }) => {
    const { owner, token } = await proxyAgent(0)
    // As a framework wraps it: a system prompt first, a timestamp before the message.
    const messages = [
      { role: 'system', content: 'You are a helpful agent.' },
      {
        role: 'user',
        content: `[Thu 2026-11-26 10:00 UTC] ${warmUpRequest().messages[0].content}`,
      },
    ]
    const whole = await completions(token, { model: 'metered-model', messages })
    assert.equal(whole.status, 200)
    const json: any = await whole.json()
    assert.equal(json.choices[0].message.content, WARM_UP_REPLY)

    const streamed = await completions(token, { model: 'metered-model', messages, stream: true })
    assert.equal(streamed.status, 200)
    const { events } = await readSse(streamed)
    assert.equal(events.at(-1), '[DONE]')
    const text = events
      .slice(0, -1)
      .map((event) => JSON.parse(event).choices[0]?.delta?.content ?? '')
      .join('')
    assert.equal(text, WARM_UP_REPLY)

    assert.lengthOf(upstream.requests, 0)
    assert.equal(await creditsOf(owner), 0, 'a balance of 0 is no obstacle: it costs nothing')
    assert.lengthOf(await llmEntries(owner.id), 0)

    // Anything else from the same agent still goes upstream and is metered (here: refused, 402).
    const other = await completions(token, {
      model: 'metered-model',
      messages: [{ role: 'user', content: 'A real question' }],
    })
    assert.equal(other.status, 402)
  })

  test('402 INSUFFICIENT_CREDITS at a balance of 0, and the upstream is never called', async ({
    assert,
  }) => {
    const { owner, token } = await proxyAgent(0)
    const response = await completions(token, {
      model: 'metered-model',
      messages: [{ role: 'user', content: 'no money' }],
    })
    assert.equal(response.status, 402)
    assert.deepEqual(await response.json(), {
      success: false,
      error: 'Not enough AI Credits for this request',
      code: 'INSUFFICIENT_CREDITS',
    })
    assert.lengthOf(upstream.requests, 0)
    assert.equal(await creditsOf(owner), 0)
    assert.lengthOf(await llmEntries(owner.id), 0)
  })

  test('402 before the upstream when the balance cannot cover the request (max_tokens)', async ({
    assert,
  }) => {
    const { owner, token } = await proxyAgent(500)
    const response = await completions(token, {
      model: 'metered-model',
      max_tokens: 4000,
      messages: [{ role: 'user', content: 'a long answer please' }],
      stream: true,
    })
    assert.equal(response.status, 402)
    assert.lengthOf(upstream.requests, 0)
    assert.equal(await creditsOf(owner), 500)
  })

  test('a request asking more output than the balance holds goes out with the limit the balance covers', async ({
    assert,
  }) => {
    // 65,536 output tokens (what Hermes asks) at 2 credits each; the balance holds about 2,480.
    const { owner, token } = await proxyAgent(5000)
    upstream.set({ usage: { prompt_tokens: 20, completion_tokens: 10 } })
    const response = await completions(token, {
      model: 'metered-model',
      max_tokens: 65_536,
      messages: [{ role: 'user', content: 'as long as you like' }],
    })
    assert.equal(response.status, 200)
    const sent = upstream.requests[0].body.max_tokens
    assert.isAbove(sent, 2000)
    assert.isAtMost(sent, 2500, 'never more than the hold covers')
    assert.equal(await creditsOf(owner), 5000 - (20 + 2 * 10), 'charged what was used')
    assert.lengthOf(await db.from('chat_credit_holds').where('user_id', owner.id), 0)
  })

  test('an upstream failure is a 503, charges nothing and returns the hold', async ({ assert }) => {
    const { owner, token } = await proxyAgent(5000)
    upstream.set({ status: 500 })
    const response = await completions(token, {
      model: 'metered-model',
      messages: [{ role: 'user', content: 'boom' }],
    })
    assert.equal(response.status, 503)
    assert.deepInclude(await response.json(), { code: 'SERVER_ERROR' })
    assert.equal(await creditsOf(owner), 5000)
    assert.lengthOf(await db.from('chat_credit_holds').where('user_id', owner.id), 0)
  })

  test('a reported cost beyond the hold charges the hold, never more, and notes the shortfall', async ({
    assert,
  }) => {
    const { owner, token } = await proxyAgent(1000)
    upstream.set({ usage: { prompt_tokens: 50_000, completion_tokens: 10 } })
    const response = await completions(token, {
      model: 'metered-model',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'under-estimated' }],
    })
    assert.equal(response.status, 200)
    const [entry] = await llmEntries(owner.id)
    const charged = -entry.credits
    // The hold: the forwarded body's bytes (at 1 credit per token) plus 16 output tokens at 2.
    const forwarded = Buffer.byteLength(JSON.stringify(upstream.requests[0].body))
    assert.isAtLeast(charged, forwarded + 2 * 16)
    assert.isBelow(charged, 1000, 'the hold, far below the reported 50,020')
    assert.equal(entry.metadata.uncoveredCredits, 50_020 - charged)
    assert.equal(await creditsOf(owner), 1000 - charged)
    assert.lengthOf(await db.from('chat_credit_holds').where('user_id', owner.id), 0)
  })

  test('concurrent proxy requests can never overspend the balance', async ({ assert }) => {
    // Each request: hold and cost of exactly 1 credit; 25 requests on 8 credits.
    upstream.set({ usage: { prompt_tokens: 5, completion_tokens: 5 }, replyDelayMs: 20 })
    const restoreRate = useUpstream(upstream, {
      rates: { 'penny-model': { input: 100, output: 100 } },
    })
    try {
      const { owner, token } = await proxyAgent(8)
      const statuses = await Promise.all(
        Array.from({ length: 25 }, (_, i) =>
          completions(token, {
            model: 'penny-model',
            messages: [{ role: 'user', content: `request ${i}` }],
          }).then(async (response) => {
            await response.arrayBuffer()
            return response.status
          })
        )
      )
      assert.equal(statuses.filter((status) => status === 200).length, 8)
      assert.equal(statuses.filter((status) => status === 402).length, 17)
      assert.equal(upstream.requests.length, 8)
      assert.equal(await creditsOf(owner), 0)
    } finally {
      restoreRate()
    }
  })

  test('the openai SDK works unchanged against the proxy (create, stream, models, 402)', async ({
    assert,
  }) => {
    const { owner, token } = await proxyAgent(5000)
    upstream.set({ reply: 'SDK says hi', usage: { prompt_tokens: 3, completion_tokens: 3 } })
    const sdk = new OpenAI({ apiKey: token, baseURL: `${baseUrl()}/v1`, maxRetries: 0 })

    const completion = await sdk.chat.completions.create({
      model: 'metered-model',
      messages: [{ role: 'user', content: 'Hello SDK' }],
    })
    assert.equal(completion.choices[0].message.content, 'SDK says hi')
    assert.equal(completion.usage?.prompt_tokens, 3)

    const stream = await sdk.chat.completions.create({
      model: 'metered-model',
      messages: [{ role: 'user', content: 'Stream SDK' }],
      stream: true,
      stream_options: { include_usage: true },
    })
    let text = ''
    let usage: any
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? ''
      if (chunk.usage) usage = chunk.usage
    }
    assert.equal(text, 'SDK says hi')
    assert.equal(usage.completion_tokens, 3)

    const models = await sdk.models.list()
    const ids = models.data.map((model) => model.id)
    assert.deepEqual(ids, ['stand-in-model', 'local-dev'])

    assert.equal(await creditsOf(owner), 5000 - 9 - 9)

    const broke = await proxyAgent(0)
    const poorSdk = new OpenAI({ apiKey: broke.token, baseURL: `${baseUrl()}/v1`, maxRetries: 0 })
    await assert.rejects(async () => {
      try {
        await poorSdk.chat.completions.create({
          model: 'metered-model',
          messages: [{ role: 'user', content: 'no credits' }],
        })
      } catch (error) {
        assert.instanceOf(error, OpenAI.APIError)
        assert.equal((error as InstanceType<typeof OpenAI.APIError>).status, 402)
        throw error
      }
    })
  })

  test('holds left by a request that never settled are returned by the job', async ({ assert }) => {
    const owner = await createUser({ credits: 100 })
    await db.rawQuery(
      `update users set ai_credits_balance = ai_credits_balance - 40 where id = ?`,
      [owner.id]
    )
    await db.table('chat_credit_holds').insert({
      id: crypto.randomUUID(),
      user_id: owner.id,
      credits: 40,
      created_at: new Date(Date.now() - 3 * 60 * 60_000),
      expires_at: new Date(Date.now() - 60 * 60_000),
    })
    assert.equal(await creditsOf(owner), 60)
    await releaseExpiredHolds()
    assert.equal(await creditsOf(owner), 100)
    assert.lengthOf(await db.from('chat_credit_holds').where('user_id', owner.id), 0)
  })
})
