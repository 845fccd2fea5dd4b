import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { modelProxyConfig } from '#config/model_proxy'
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
import { answersWritten } from '#tests/helpers/answers_written'

/**
 * The hosted model upstream misbehaves for real (a local server that hangs,
 * fails, falls silent or drops the connection mid-answer): every chat ends
 * within its bound with a clear error, the credit hold never stays open,
 * and only what reached the client is charged.
 */
const owners = agentOwners({ tier: 'pro' })
const BALANCE = 10_000
// 1 credit per prompt token and 2 per completion token.
const RATES = { 'metered-model': { input: 1_000_000, output: 2_000_000 } }

function post(path: string, token: string, body: unknown) {
  return fetch(`${baseUrl()}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'authorization': `Bearer ${token}` },
    body: JSON.stringify(body),
    // A hang fails the test instead of stalling it.
    signal: AbortSignal.timeout(20_000),
  })
}

async function openHolds(userId: string) {
  const rows = await db.from('chat_credit_holds').where('user_id', userId)
  return rows.length
}

async function usageEntries(userId: string) {
  await answersWritten()
  return db.from('credit_ledger').where({ user_id: userId, kind: 'llm' })
}

async function storedMessages(agentId: string) {
  await answersWritten()
  const rows = await db.from('chat_messages').where('agent_id', agentId)
  return rows.length
}

test.group('Fault: the model upstream hangs, fails or breaks off', (group) => {
  let upstream: ModelUpstream
  let restore: () => void
  const bounds = { ...modelProxyConfig }

  group.setup(async () => {
    upstream = await startModelUpstream()
    restore = useUpstream(upstream, { rates: RATES })
    modelProxyConfig.timeoutMs = 1500
    modelProxyConfig.streamIdleTimeoutMs = 1500
    return async () => {
      modelProxyConfig.timeoutMs = bounds.timeoutMs
      modelProxyConfig.streamIdleTimeoutMs = bounds.streamIdleTimeoutMs
      restore()
      await upstream.close()
      await owners.removeAgents()
    }
  })
  group.each.setup(() => upstream.reset())

  async function hostedAgent() {
    const user = await owners.create({ credits: BALANCE })
    const agent = await createAgentFor(user, { config: { model: 'metered-model' } })
    return { user, agent, token: jwtFor(user), apiKey: await apiKeyFor(user) }
  }

  test('no answer at all: 503 once the bound passes; hold returned, nothing charged or stored', async ({
    assert,
  }) => {
    const { user, agent, apiKey } = await hostedAgent()
    upstream.set({ replyDelayMs: 60_000 })
    const started = Date.now()
    const response = await post(`/api/v1/agents/${agent.id}/chat`, apiKey, {
      message: 'Are you there?',
    })
    const body = (await response.json()) as { code: string; error: string }
    console.log(`    upstream hang: 503 after ${Date.now() - started} ms (bound 1.5 s)`)
    assert.equal(response.status, 503)
    assert.equal(body.code, 'SERVER_ERROR')
    assert.include(body.error, 'no answer within')
    assert.equal(await creditsOf(user), BALANCE)
    assert.equal(await openHolds(user.id), 0)
    assert.lengthOf(await usageEntries(user.id), 0)
    assert.equal(await storedMessages(agent.id), 0)
  })

  test('a 5xx answer: 503 naming the provider status; nothing charged or stored', async ({
    assert,
  }) => {
    const { user, agent, apiKey } = await hostedAgent()
    upstream.set({ status: 502 })
    const response = await post(`/api/v1/agents/${agent.id}/chat`, apiKey, { message: 'Hello' })
    const body = (await response.json()) as { code: string; error: string }
    assert.equal(response.status, 503)
    assert.equal(body.code, 'SERVER_ERROR')
    assert.include(body.error, '502')
    assert.equal(await creditsOf(user), BALANCE)
    assert.equal(await openHolds(user.id), 0)
    assert.equal(await storedMessages(agent.id), 0)
  })

  for (const fault of ['stallAfterTokens', 'cutAfterTokens'] as const) {
    const what = fault === 'stallAfterTokens' ? 'falls silent' : 'drops the connection'
    test(`a stream that ${what} mid-answer: the client gets the tokens, an error event and [DONE]; only delivered tokens are charged`, async ({
      assert,
    }) => {
      const { user, agent, token } = await hostedAgent()
      upstream.set({ reply: 'one two three four five six', [fault]: 2 })
      const started = Date.now()
      const response = await post(`/agents/${agent.id}/chat/stream`, token, {
        message: 'Count for me',
      })
      assert.equal(response.status, 200)
      const { events } = await readSse(response)
      console.log(`    upstream ${what}: stream ended after ${Date.now() - started} ms`)
      const payloads = events.slice(0, -1).map((event) => JSON.parse(event))
      assert.deepEqual(
        payloads.filter((event) => 'token' in event).map((event) => event.token),
        ['one ', 'two ']
      )
      assert.property(payloads.at(-1), 'error')
      assert.equal(events.at(-1), '[DONE]')

      assert.equal(await openHolds(user.id), 0, 'the hold is settled')
      const entries = await usageEntries(user.id)
      assert.lengthOf(entries, 1)
      const [entry] = entries
      assert.isTrue(entry.metadata.cutShort)
      // "one two " is two or three tokens by any estimate; the whole reply would be six or more.
      assert.isAtMost(entry.output_tokens, 3)
      assert.isAbove(entry.output_tokens, 0)
      assert.equal(await creditsOf(user), BALANCE + entry.credits)
      assert.equal(await storedMessages(agent.id), 0, 'a broken answer is not kept as history')
    })
  }
})
