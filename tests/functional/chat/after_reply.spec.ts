import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners } from '#tests/helpers/agents_http'
import { apiKeyFor } from '#tests/helpers/identity'
import { baseUrl, requestJson } from '#tests/helpers/http'
import { upstreamForGroup } from '#tests/helpers/model_upstream'
import { waitFor } from '#tests/helpers/processes'

const owners = agentOwners({ tier: 'pro' })

/** A plain HTTP call (not Japa's client, whose teardown waits for the service's writes). */
function call(path: string, token: string, json?: unknown) {
  return requestJson(baseUrl(), path, { token, json })
}

/**
 * A hosted chat answers while its exchange is stored and its credits
 * settle (docs/chat.md "After the answer"); the account's next request and
 * the agent's next turn see those writes. The settlement is held back here
 * by a lock on the account's row, so the order is certain, not a race.
 */
test.group('Chat: the answer goes out before its writes end; what reads them waits', (group) => {
  group.teardown(async () => owners.removeAgents())
  const upstream = upstreamForGroup(group, {
    rates: { 'metered-model': { input: 1_000_000, output: 2_000_000 } },
  })

  test('the answer comes while the settlement waits; /me waits for it; the next turn has the exchange', async ({
    assert,
  }) => {
    const user = await owners.create({ credits: 10_000 })
    const agent = await createAgentFor(user, { config: { model: 'metered-model' } })
    const key = await apiKeyFor(user)
    upstream.set({
      reply: 'Aye!',
      usage: { prompt_tokens: 20, completion_tokens: 5 },
      replyDelayMs: 300,
    })

    const trx = await db.transaction()
    let released = false
    try {
      const chat = call(`/api/v1/agents/${agent.id}/chat`, key, { message: 'First question' })
      // Once the hold is taken and the upstream has the request, the row is locked: the
      // settlement waits (the model may be asked before the hold: hold_alongside.spec.ts).
      await waitFor(
        async () => {
          if (upstream.requests.length === 0) return undefined
          const holds = await db.from('chat_credit_holds').where('user_id', user.id)
          return holds.length > 0 ? true : undefined
        },
        { intervalMs: 10, what: 'the chat to hold its credits and reach the model' }
      )
      await trx.rawQuery('select id from users where id = ? for update', [user.id])
      const answered = await chat
      assert.equal(answered.status, 200, JSON.stringify(answered.body))
      assert.equal(answered.body.data.content, 'Aye!')

      const me = call('/api/v1/me', key).then((response) => ({ response, released }))
      await new Promise((resolve) => setTimeout(resolve, 200))
      released = true
      await trx.commit()
      const seen = await me
      assert.isTrue(seen.released, '/me answered only after the settlement')
      assert.equal(seen.response.status, 200)
      assert.equal(seen.response.body.data.aiCreditsBalance, 10_000 - (20 + 10))
    } finally {
      if (!trx.isCompleted) await trx.rollback()
    }

    const second = await call(`/api/v1/agents/${agent.id}/chat`, key, {
      message: 'Second question',
    })
    assert.equal(second.status, 200)
    assert.deepEqual(upstream.requests[1].body.messages.slice(-3), [
      { role: 'user', content: 'First question' },
      { role: 'assistant', content: 'Aye!' },
      { role: 'user', content: 'Second question' },
    ])
  })
})
