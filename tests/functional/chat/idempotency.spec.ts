import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { webhookTokenOf } from '#agents/services/agent_tokens'
import creditLedger from '#credits/services/credit_ledger'
import { purgeExpiredIdempotencyKeys } from '#chat/services/idempotency'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners } from '#tests/helpers/agents_http'
import { apiKeyFor, creditsOf, jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import {
  readSse,
  startModelUpstream,
  useUpstream,
  type ModelUpstream,
} from '#tests/helpers/model_upstream'
import type User from '#identity/models/user'
import { answersWritten } from '#tests/helpers/answers_written'

const owners = agentOwners({ tier: 'pro' })
const owner = (credits = 10_000) => owners.create({ credits })

async function storedCount(agentId: string) {
  await answersWritten()
  const rows = await db.from('chat_messages').where('agent_id', agentId)
  return rows.length
}

test.group('Idempotency-Key on the chat routes', (group) => {
  let upstream: ModelUpstream
  let restore: () => void
  group.setup(async () => {
    upstream = await startModelUpstream()
    restore = useUpstream(upstream, {
      defaultModel: 'metered-model',
      rates: { 'metered-model': { input: 1_000_000, output: 2_000_000 } },
    })
    return async () => {
      restore()
      await upstream.close()
      await owners.removeAgents()
    }
  })
  group.each.setup(() => upstream.reset())

  test('a retry returns the first answer without running or charging again', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const key = await apiKeyFor(user)
    let calls = 0
    upstream.set({
      reply: () => `answer number ${++calls}`,
      usage: { prompt_tokens: 10, completion_tokens: 5 },
    })
    const send = () =>
      client
        .post(`/api/v1/agents/${agent.id}/chat`)
        .bearerToken(key)
        .header('Idempotency-Key', 'order-42')
        .json({ message: 'Do it once' })

    const first = await send()
    first.assertStatus(200)
    const second = await send()
    second.assertStatus(200)
    assert.deepEqual(second.body(), first.body())
    assert.equal(first.body().data.content, 'answer number 1')
    assert.equal(second.header('idempotency-replayed'), 'true')
    assert.lengthOf(upstream.requests, 1)
    assert.equal(await creditsOf(user), 10_000 - 20)
    assert.equal(await storedCount(agent.id), 2)

    // Another key runs again.
    const other = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(key)
      .header('Idempotency-Key', 'order-43')
      .json({ message: 'Do it once' })
    assert.equal(other.body().data.content, 'answer number 2')
  })

  test('keys belong to their caller; the same key with another body is a 400', async ({
    client,
    assert,
  }) => {
    const alice = await owner()
    const bob = await owner()
    const aliceAgent = await createAgentFor(alice)
    const bobAgent = await createAgentFor(bob)
    const post = async (user: User, agentId: string, message: string) =>
      client
        .post(`/api/v1/agents/${agentId}/chat`)
        .bearerToken(await apiKeyFor(user))
        .header('Idempotency-Key', 'shared-key')
        .json({ message })
    const aliceFirst = await post(alice, aliceAgent.id, 'hello')
    aliceFirst.assertStatus(200)
    const bobFirst = await post(bob, bobAgent.id, 'hello')
    bobFirst.assertStatus(200)
    assert.lengthOf(upstream.requests, 2)

    const changed = await post(alice, aliceAgent.id, 'a different message')
    changed.assertStatus(400)
    assert.equal(changed.body().code, 'VALIDATION_ERROR')
    assert.include(changed.body().error, 'Idempotency-Key')

    const bad = await client
      .post(`/api/v1/agents/${aliceAgent.id}/chat`)
      .bearerToken(await apiKeyFor(alice))
      .header('Idempotency-Key', 'has spaces in it')
      .json({ message: 'hello' })
    bad.assertStatus(400)
  })

  test('a concurrent duplicate gets 429 with Retry-After while the first runs; the model runs once', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const key = await apiKeyFor(user)
    upstream.set({ replyDelayMs: 400 })
    const send = () =>
      client
        .post(`/api/v1/agents/${agent.id}/chat`)
        .bearerToken(key)
        .header('Idempotency-Key', 'slow-one')
        .json({ message: 'slow' })
    const [a, b] = await Promise.all([send(), send()])
    assert.sameMembers([a.status(), b.status()], [200, 429])
    const busy = a.status() === 429 ? a : b
    assert.equal(busy.body().code, 'RATE_LIMIT_EXCEEDED')
    assert.equal(busy.header('retry-after'), '1')
    assert.lengthOf(upstream.requests, 1)

    const retry = await send()
    retry.assertStatus(200)
    assert.deepEqual(retry.body(), (a.status() === 200 ? a : b).body())
  })

  test('a failed first request stores nothing: the retry runs', async ({ client, assert }) => {
    const user = await owner(0)
    const agent = await createAgentFor(user)
    const key = await apiKeyFor(user)
    const send = () =>
      client
        .post(`/api/v1/agents/${agent.id}/chat`)
        .bearerToken(key)
        .header('Idempotency-Key', 'after-top-up')
        .json({ message: 'retry me' })
    const refused = await send()
    refused.assertStatus(402)
    await creditLedger.credit(user.id, 5000, { kind: 'grant', reason: 'top-up' })
    const retried = await send()
    retried.assertStatus(200)
    assert.notEqual(retried.header('idempotency-replayed'), 'true')
    assert.lengthOf(upstream.requests, 1)
  })

  test('SSE stream: a retry replays the stored answer without calling the model', async ({
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    upstream.set({ reply: 'streamed once' })
    const send = () =>
      fetch(`${baseUrl()}/agents/${agent.id}/chat/stream`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'authorization': `Bearer ${jwtFor(user)}`,
          'idempotency-key': 'stream-key',
        },
        body: JSON.stringify({ message: 'stream it' }),
      })
    const first = await readSse(await send())
    const replay = await send()
    assert.equal(replay.headers.get('idempotency-replayed'), 'true')
    const second = await readSse(replay)
    const text = (events: string[]) =>
      events
        .filter((event) => event !== '[DONE]')
        .map((event) => JSON.parse(event).token)
        .join('')
    assert.equal(text(first.events), 'streamed once')
    assert.equal(text(second.events), 'streamed once')
    assert.equal(second.events.at(-1), '[DONE]')
    assert.lengthOf(upstream.requests, 1)
    assert.equal(await storedCount(agent.id), 2)
  })

  test('test-chat and the inbound webhook honour the key too', async ({ client, assert }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    let calls = 0
    upstream.set({
      reply: () => `reply ${++calls}`,
      usage: { prompt_tokens: 1, completion_tokens: 1 },
    })

    const testChat = () =>
      client
        .post('/agents/test-chat')
        .bearerToken(jwtFor(user))
        .header('Idempotency-Key', 'tc-1')
        .json({ message: 'hi', systemPrompt: 'be brief' })
    const one = await testChat()
    const two = await testChat()
    assert.deepEqual(two.body().data, one.body().data)
    assert.equal(await creditsOf(user), 10_000 - 3)

    const hook = () =>
      client
        .post(`/webhooks/in/${webhookTokenOf(agent)}`)
        .header('Idempotency-Key', 'event-9')
        .json({ message: 'event 9' })
    const first = await hook()
    const second = await hook()
    assert.deepEqual(second.body().data, first.body().data)
    assert.equal(await storedCount(agent.id), 2)
    assert.lengthOf(upstream.requests, 2)
  })

  test('after 24 h a key is forgotten (the purge job deletes it) and runs again', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const key = await apiKeyFor(user)
    const send = () =>
      client
        .post(`/api/v1/agents/${agent.id}/chat`)
        .bearerToken(key)
        .header('Idempotency-Key', 'day-old')
        .json({ message: 'again tomorrow' })
    const first = await send()
    first.assertStatus(200)
    await db
      .from('chat_idempotency_keys')
      .where({ scope: user.id, key: 'day-old' })
      .update({ expires_at: new Date(Date.now() - 1000) })
    assert.isAtLeast(await purgeExpiredIdempotencyKeys(), 1)
    const later = await send()
    later.assertStatus(200)
    assert.notEqual(later.header('idempotency-replayed'), 'true')
    assert.lengthOf(upstream.requests, 2)
  })
})
