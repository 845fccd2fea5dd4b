import { test } from '@japa/runner'
import WebSocket from 'ws'
import { chatConfig } from '#config/chat'
import { webhookTokenOf } from '#agents/services/agent_tokens'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners } from '#tests/helpers/agents_http'
import { apiKeyFor, jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import { startModelUpstream, useUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'
import { waitFor } from '#tests/helpers/runtime'

/**
 * Concurrency limits of chat (docs/hardening.md "Limits"): chats an agent
 * answers at once, on every surface together, and chat streams an account
 * holds open. The stand-in model answers slowly, so chats stay in flight
 * until the test lets them go (aborting a request cancels its model call).
 */
const owners = agentOwners({ tier: 'pro', credits: 1_000_000 })

function post(path: string, body: unknown, headers: Record<string, string>, signal: AbortSignal) {
  return fetch(`${baseUrl()}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    signal,
  })
}

/** One WebSocket chat message; answers the server's first reply. */
async function socketChat(agentId: string, token: string, message: string): Promise<any> {
  const ws = new WebSocket(`${baseUrl().replace(/^http/, 'ws')}/agents/${agentId}/ws`, {
    headers: { authorization: `Bearer ${token}` },
  })
  try {
    await new Promise((resolve, reject) => {
      ws.once('open', resolve)
      ws.once('error', reject)
    })
    const reply = new Promise((resolve) =>
      ws.once('message', (data) => resolve(JSON.parse(String(data))))
    )
    ws.send(JSON.stringify({ type: 'chat', payload: { message } }))
    return await reply
  } finally {
    ws.close()
  }
}

test.group('Chat concurrency limits', (group) => {
  let upstream: ModelUpstream
  group.setup(async () => {
    upstream = await startModelUpstream()
    const restore = useUpstream(upstream)
    return async () => {
      restore()
      await upstream.close()
      await owners.removeAgents()
    }
  })
  group.each.setup(() => {
    upstream.reset()
    const previous = { ...chatConfig }
    return () => {
      chatConfig.maxStreamsPerAccount = previous.maxStreamsPerAccount
      chatConfig.maxConcurrentChatsPerAgent = previous.maxConcurrentChatsPerAgent
    }
  })

  test('an agent answers at most 4 chats at once across surfaces: the fifth gets 429 (WebSocket: an error message); a slot frees when one ends', async ({
    assert,
  }) => {
    assert.equal(chatConfig.maxConcurrentChatsPerAgent, 4, 'the documented default')
    const user = await owners.create()
    const agent = await createAgentFor(user)
    const key = await apiKeyFor(user)
    const jwt = jwtFor(user)
    const apiChat = `/api/v1/agents/${agent.id}/chat`
    const withKey = { authorization: `Bearer ${key}` }
    upstream.set({ replyDelayMs: 120_000, tokenDelayMs: 120_000 })

    const held = Array.from({ length: 4 }, () => new AbortController())
    const pending = [
      post(apiChat, { message: 'one' }, withKey, held[0].signal),
      post(apiChat, { message: 'two' }, withKey, held[1].signal),
      post(
        `/agents/${agent.id}/chat/stream`,
        { message: 'three' },
        { authorization: `Bearer ${jwt}` },
        held[2].signal
      ),
      post(`/webhooks/in/${webhookTokenOf(agent)}`, { message: 'four' }, {}, held[3].signal),
    ]
    for (const request of pending) request.catch(() => {})
    await waitFor('four chats at the model', () => upstream.inFlight >= 4, 20_000)

    const refused = await post(apiChat, { message: 'five' }, withKey, new AbortController().signal)
    assert.equal(refused.status, 429)
    assert.equal(refused.headers.get('retry-after'), '5')
    const body = (await refused.json()) as any
    assert.equal(body.code, 'RATE_LIMIT_EXCEEDED')
    assert.match(body.error, /already answering 4 chats/)
    const overSocket = await socketChat(agent.id, jwt, 'five, over WebSocket')
    assert.deepEqual(overSocket.type, 'error')
    assert.equal(overSocket.payload.code, 'RATE_LIMIT_EXCEEDED')
    assert.equal(upstream.inFlight, 4, 'the refused chats never reached the model')

    // Another agent of the same owner is not held up by this one.
    const other = await createAgentFor(user)
    upstream.set({ replyDelayMs: 0, tokenDelayMs: 0 })
    const elsewhere = await post(
      `/api/v1/agents/${other.id}/chat`,
      { message: 'hi' },
      withKey,
      new AbortController().signal
    )
    assert.equal(elsewhere.status, 200)

    held[0].abort()
    const freed = await waitFor('a freed chat slot', async () => {
      const answer = await post(apiChat, { message: 'six' }, withKey, new AbortController().signal)
      if (answer.status === 200) return answer
      await answer.body?.cancel()
      return false
    })
    assert.equal(((await freed.json()) as any).data.content, 'Hello from the stand-in model.')
    for (const controller of held) controller.abort()
  }).timeout(60_000)

  test('chat streams per account are capped: the (N+1)th gets 429; a slot frees when one ends', async ({
    assert,
  }) => {
    chatConfig.maxStreamsPerAccount = 2
    const user = await owners.create()
    const first = await createAgentFor(user)
    const second = await createAgentFor(user)
    const auth = { authorization: `Bearer ${jwtFor(user)}` }
    upstream.set({ tokenDelayMs: 120_000 })
    const open = (agentId: string, signal: AbortSignal) =>
      post(`/agents/${agentId}/chat/stream`, { message: 'stream' }, auth, signal)

    const held = [new AbortController(), new AbortController()]
    const streams = [await open(first.id, held[0].signal), await open(second.id, held[1].signal)]
    for (const stream of streams) assert.equal(stream.status, 200)

    const extra = await open(first.id, new AbortController().signal)
    assert.equal(extra.status, 429)
    assert.equal(extra.headers.get('retry-after'), '5')
    assert.equal(((await extra.json()) as any).code, 'RATE_LIMIT_EXCEEDED')

    held[0].abort()
    upstream.set({ tokenDelayMs: 0 })
    const again = await waitFor('a freed stream slot', async () => {
      const answer = await open(first.id, new AbortController().signal)
      const ok = answer.status === 200
      await answer.body?.cancel()
      return ok
    })
    assert.isTrue(again)
    held[1].abort()
  }).timeout(60_000)
})
