import type { Assert } from '@japa/assert'
import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { authCache } from '#identity/services/auth_cache'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners } from '#tests/helpers/agents_http'
import { apiKeyFor, creditsOf } from '#tests/helpers/identity'
import { baseUrl, requestJson } from '#tests/helpers/http'
import { answersWritten } from '#tests/helpers/answers_written'
import { upstreamForGroup } from '#tests/helpers/model_upstream'
import { waitFor } from '#tests/helpers/processes'

const owners = agentOwners({ tier: 'pro' })

function call(path: string, token: string, json?: unknown) {
  return requestJson(baseUrl(), path, { token, json })
}

/**
 * The hosted path asks the model alongside its credit hold when the hold
 * is all but sure (docs/chat.md "The hold and the model call"), and only
 * after it otherwise. The hold is held back here by a lock on the account's
 * row, so what reaches the model meanwhile is certain, not a race.
 */
test.group('Chat: the model is asked while an all-but-sure hold is taken', (group) => {
  group.teardown(async () => owners.removeAgents())
  const upstream = upstreamForGroup(group, {
    rates: { 'metered-model': { input: 1_000_000, output: 2_000_000 } },
  })

  /** An account and agent with `credits`, its row in the service's auth cache (one /me). */
  async function payer(credits: number, agentConfig: Record<string, unknown> = {}) {
    const user = await owners.create({ credits })
    const agent = await createAgentFor(user, { config: { model: 'metered-model', ...agentConfig } })
    const key = await apiKeyFor(user)
    assert200(await call('/api/v1/me', key))
    return { user, agent, key }
  }

  function assert200(response: { status: number; body: any }) {
    if (response.status !== 200)
      throw new Error(`${response.status} ${JSON.stringify(response.body)}`)
  }

  /** A hold statement of this database waits for a row lock. */
  async function holdWaiting() {
    const { rows } = await db.rawQuery(
      `select 1 from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock'
          and query like '%insert into chat_credit_holds%'`
    )
    return rows.length > 0 ? true : undefined
  }

  /** Runs `work` while the account's row is locked (a hold waits), then lets it go. */
  async function withAccountLocked<T>(userId: string, work: () => Promise<T>): Promise<T> {
    const trx = await db.transaction()
    try {
      await trx.rawQuery('select id from users where id = ? for update', [userId])
      return await work()
    } finally {
      await trx.rollback()
    }
  }

  /** A chat whose hold waits for the locked row never reaches the model meanwhile; then it answers. */
  async function assertAskedOnlyAfterHold(
    assert: Assert,
    userId: string,
    agentId: string,
    key: string
  ) {
    upstream.set({ reply: 'Later', usage: { prompt_tokens: 20, completion_tokens: 5 } })
    let chat!: ReturnType<typeof call>
    await withAccountLocked(userId, async () => {
      chat = call(`/api/v1/agents/${agentId}/chat`, key, { message: 'Held first' })
      await waitFor(holdWaiting, {
        intervalMs: 10,
        timeoutMs: 10_000,
        what: 'the hold to wait for the row',
      })
      assert.lengthOf(upstream.requests, 0, 'the model is not asked while the hold waits')
    })
    const answered = await chat
    assert.equal(answered.status, 200, JSON.stringify(answered.body))
    assert.lengthOf(upstream.requests, 1)
  }

  test('a rich account: the model has the request before the hold is taken; charged once', async ({
    assert,
  }) => {
    const { user, agent, key } = await payer(10_000_000)
    upstream.set({ reply: 'Early', usage: { prompt_tokens: 20, completion_tokens: 5 } })
    let chat!: ReturnType<typeof call>
    await withAccountLocked(user.id, async () => {
      chat = call(`/api/v1/agents/${agent.id}/chat`, key, { message: 'Quick one' })
      await waitFor(async () => (upstream.requests.length > 0 ? true : undefined), {
        intervalMs: 10,
        timeoutMs: 10_000,
        what: 'the model to be asked while the hold waits for the row',
      })
      const holds = await db.from('chat_credit_holds').where('user_id', user.id)
      assert.lengthOf(holds, 0, 'no hold taken yet')
    })
    const answered = await chat
    assert.equal(answered.status, 200, JSON.stringify(answered.body))
    assert.equal(answered.body.data.content, 'Early')
    assert.lengthOf(upstream.requests, 1, 'asked once')
    await answersWritten()
    assert.equal(await creditsOf(user), 10_000_000 - (20 + 10))
    const entries = await db.from('credit_ledger').where({ user_id: user.id, kind: 'llm' })
    assert.lengthOf(entries, 1)
  })

  test('an account with a monthly budget: the model is asked only after the hold', async ({
    assert,
  }) => {
    const { user, agent, key } = await payer(10_000_000)
    await db.from('users').where('id', user.id).update({ ai_credits_monthly_budget: 5_000_000 })
    // The row's change notification evicts the server's cached copy, after the commit: a chat
    // before that (a loaded host delays it) would still see no budget.
    await waitFor(
      async () => (authCache.user(user.id)?.ai_credits_monthly_budget === null ? undefined : true),
      { intervalMs: 10, timeoutMs: 10_000, what: "the cached row's eviction" }
    )
    assert200(await call('/api/v1/me', key))
    await assertAskedOnlyAfterHold(assert, user.id, agent.id, key)
  })

  test('a hold refused after the early call (the balance spent meanwhile) cancels the call: 402, nothing charged', async ({
    assert,
  }) => {
    const { user, agent, key } = await payer(10_000_000)
    upstream.set({ reply: 'Never read', replyDelayMs: 2_000 })
    const trx = await db.transaction()
    let chat!: ReturnType<typeof call>
    try {
      await trx.rawQuery('select id from users where id = ? for update', [user.id])
      chat = call(`/api/v1/agents/${agent.id}/chat`, key, { message: 'Spent already' })
      await waitFor(async () => (upstream.requests.length > 0 ? true : undefined), {
        intervalMs: 10,
        timeoutMs: 10_000,
        what: 'the early call',
      })
      // Another spend empties the balance before the hold gets the row.
      await trx.rawQuery('update users set ai_credits_balance = 0 where id = ?', [user.id])
      await trx.commit()
    } finally {
      if (!trx.isCompleted) await trx.rollback()
    }
    const refused = await chat
    assert.equal(refused.status, 402, JSON.stringify(refused.body))
    assert.equal(refused.body.code, 'INSUFFICIENT_CREDITS')
    assert.lengthOf(upstream.requests, 1, 'asked once, early, and never again')
    await answersWritten()
    assert.equal(await creditsOf(user), 0, 'nothing charged')
    assert.lengthOf(await db.from('chat_credit_holds').where('user_id', user.id), 0)
    assert.lengthOf(await db.from('credit_ledger').where({ user_id: user.id, kind: 'llm' }), 0)
  })

  test('an agent with a budget of its own: the model is asked only after the hold (a refusal never reaches it)', async ({
    assert,
  }) => {
    const { user, agent, key } = await payer(10_000_000, { budget: { monthlyCredits: 5_000_000 } })
    await assertAskedOnlyAfterHold(assert, user.id, agent.id, key)
  })
})
