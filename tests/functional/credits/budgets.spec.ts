import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import type Agent from '#agents/models/agent'
import { proxyTokenOf } from '#agents/services/agent_tokens'
import creditLedger from '#credits/services/credit_ledger'
import { budgetMonth } from '#credits/services/credit_budgets'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { apiKeyFor, createUser, jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import { proxyCompletions, upstreamForGroup } from '#tests/helpers/model_upstream'
import { runDueSchedules } from '#schedules/services/schedule_service'
import { OUT_OF_BUDGET_REPLY, routeInbound } from '#channels/services/channel_router'
import type { ChannelPlugin } from '#plugins/types'

/**
 * Monthly AI Credit budgets (issue 29 item 5; docs/accounts.md "Budgets"):
 * an agent's (`config.budget.monthlyCredits`) and the account's
 * (`PUT /ai-credits/budget`). Costs: 1 credit per input token, 2 per
 * output token; a hold covers every byte of the forwarded body as a
 * token plus the output limit.
 */
const METERED = { 'metered-model': { input: 1_000_000, output: 2_000_000 } }

const monthStart = () => budgetMonth().start.toISOString()
const nextMonthStart = () => budgetMonth().resetsAt.toISOString()

async function ownerWithAgent(budget?: number, credits = 100_000) {
  const owner = await createUser({ credits })
  const agent = await createAgentFor(owner, {
    config: {
      personality: 'A budgeted agent',
      model: 'metered-model',
      ...(budget ? { budget: { monthlyCredits: budget } } : {}),
    },
  })
  return { owner, agent }
}

/** Spending recorded the way hosted calls record it (an `llm` debit naming the agent). */
async function spend(ownerId: string, credits: number, agentId: string | null = null) {
  await creditLedger.debit(ownerId, credits, {
    kind: 'llm',
    provider: 'test',
    model: 'metered-model',
    metadata: { source: 'test', agentId },
  })
}

/** A cheap proxy call: a 100-byte body, 20 output tokens at most (a hold of 204 credits). */
function proxyCall(token: string) {
  return proxyCompletions(token, {
    model: 'metered-model',
    max_tokens: 20,
    messages: [{ role: 'user', content: 'hi' }],
  })
}

/** The status of a cheap proxy call (its body read, so the connection is reused). */
async function proxyStatus(token: string): Promise<number> {
  const response = await proxyCall(token)
  await response.arrayBuffer()
  return response.status
}

async function budgetNotifications(owner: { id: string }) {
  const response = await fetch(`${baseUrl()}/auth/notifications`, {
    headers: { authorization: `Bearer ${jwtFor(owner)}` },
  })
  const json: any = await response.json()
  return (json.data.notifications as any[]).filter((note) => note.type === 'ai_credits_budget')
}

async function budgetFeed(owner: { id: string }, agent: Agent) {
  const response = await fetch(`${baseUrl()}/agents/${agent.id}/feed`, {
    headers: { authorization: `Bearer ${jwtFor(owner)}` },
  })
  const json: any = await response.json()
  return (json.data.events as any[]).filter((event) => event.type === 'budget')
}

function patchAgentConfig(owner: { id: string }, agent: Agent, config: Record<string, unknown>) {
  return fetch(`${baseUrl()}/agents/${agent.id}`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/json', 'authorization': `Bearer ${jwtFor(owner)}` },
    body: JSON.stringify({ config }),
  })
}

test.group('Budgets: setting and validating', () => {
  test('the account budget is set, read back and removed with PUT/GET /ai-credits/budget', async ({
    client,
    assert,
  }) => {
    const owner = await createUser({ credits: 1000 })
    await spend(owner.id, 30)
    const empty = await client.get('/ai-credits/budget').bearerToken(jwtFor(owner))
    empty.assertStatus(200)
    assert.deepEqual(empty.body().data, {
      monthlyCredits: null,
      spentCredits: 30,
      period: monthStart().slice(0, 7),
      resetsAt: nextMonthStart(),
    })

    const set = await client
      .put('/ai-credits/budget')
      .bearerToken(jwtFor(owner))
      .json({ monthlyCredits: 5000 })
    set.assertStatus(200)
    assert.equal(set.body().data.monthlyCredits, 5000)
    const read = await client.get('/ai-credits/budget').bearerToken(jwtFor(owner))
    assert.equal(read.body().data.monthlyCredits, 5000)

    const removed = await client
      .put('/ai-credits/budget')
      .bearerToken(jwtFor(owner))
      .json({ monthlyCredits: null })
    removed.assertStatus(200)
    assert.isNull(removed.body().data.monthlyCredits)

    const anonymous = await client.get('/ai-credits/budget')
    anonymous.assertStatus(401)
  })

  test('bad account budgets are 400 VALIDATION_ERROR and change nothing', async ({
    client,
    assert,
  }) => {
    const owner = await createUser()
    await client.put('/ai-credits/budget').bearerToken(jwtFor(owner)).json({ monthlyCredits: 700 })
    for (const body of [
      {},
      { monthlyCredits: 0 },
      { monthlyCredits: -5 },
      { monthlyCredits: 2.5 },
      { monthlyCredits: '100' },
      { monthlyCredits: 2_000_000_000 },
      { monthlyCredits: true },
    ]) {
      const response = await client.put('/ai-credits/budget').bearerToken(jwtFor(owner)).json(body)
      assert.equal(response.status(), 400, JSON.stringify(body))
      assert.equal(response.body().code, 'VALIDATION_ERROR')
    }
    const read = await client.get('/ai-credits/budget').bearerToken(jwtFor(owner))
    assert.equal(read.body().data.monthlyCredits, 700)
  })

  test('an agent budget is config.budget.monthlyCredits: set, validated, removed with null', async ({
    assert,
  }) => {
    const { owner, agent } = await ownerWithAgent()
    const set = await patchAgentConfig(owner, agent, { budget: { monthlyCredits: 2500 } })
    assert.equal(set.status, 200)
    const detail: any = await set.json()
    assert.deepEqual(detail.data.config.budget, { monthlyCredits: 2500 })

    for (const budget of [
      { monthlyCredits: 0 },
      { monthlyCredits: -1 },
      { monthlyCredits: 1.5 },
      { monthlyCredits: '100' },
      { monthlyCredits: 5_000_000_000 },
      { monthly: 100 },
      5,
      [100],
    ]) {
      const response = await patchAgentConfig(owner, agent, { budget })
      assert.equal(response.status, 400, JSON.stringify(budget))
      const json: any = await response.json()
      assert.equal(json.code, 'VALIDATION_ERROR')
      assert.include(json.error, 'config.budget')
    }

    const removed = await patchAgentConfig(owner, agent, { budget: null })
    assert.equal(removed.status, 200)
    const after: any = await removed.json()
    assert.notProperty(after.data.config, 'budget')
  })
})

test.group('Budgets: refusals on every chat path', (group) => {
  const upstream = upstreamForGroup(group, { rates: METERED })

  test('the hosted chat route is refused with 402 naming the agent budget and its reset', async ({
    client,
    assert,
  }) => {
    const { owner, agent } = await ownerWithAgent(10_000)
    await spend(owner.id, 9_950, agent.id)
    const response = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(await apiKeyFor(owner))
      .json({ message: 'Hello' })
    response.assertStatus(402)
    assert.equal(response.body().code, 'INSUFFICIENT_CREDITS')
    assert.include(response.body().error, "This agent's monthly AI Credit budget of 10000")
    assert.include(response.body().error, nextMonthStart())
    assert.lengthOf(upstream.requests, 0, 'the provider never saw it')
    assert.lengthOf(await db.from('chat_credit_holds').where('user_id', owner.id), 0)
    // Refused calls count as the budget reached: one 100 % alert.
    const notes = await budgetNotifications(owner)
    assert.lengthOf(notes, 1)
    assert.include(notes[0].title, 'has used its monthly AI Credit budget')
  })

  test('the SSE route is refused with 402 before the stream starts', async ({ assert }) => {
    const { owner, agent } = await ownerWithAgent(10_000)
    await spend(owner.id, 9_950, agent.id)
    const response = await fetch(`${baseUrl()}/agents/${agent.id}/chat/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'authorization': `Bearer ${jwtFor(owner)}` },
      body: JSON.stringify({ message: 'Hello' }),
    })
    assert.equal(response.status, 402)
    const json: any = await response.json()
    assert.equal(json.code, 'INSUFFICIENT_CREDITS')
    assert.include(json.error, "This agent's monthly AI Credit budget")
    assert.lengthOf(upstream.requests, 0)
  })

  test("the model proxy (the agent's framework) is refused, streamed or not", async ({
    assert,
  }) => {
    const { owner, agent } = await ownerWithAgent(1000)
    const token = proxyTokenOf(agent)
    assert.equal(await proxyStatus(token), 200)
    await spend(owner.id, 995, agent.id)
    for (const stream of [false, true]) {
      const response = await proxyCompletions(token, {
        model: 'metered-model',
        max_tokens: 20,
        stream,
        messages: [{ role: 'user', content: 'hi' }],
      })
      assert.equal(response.status, 402, `stream: ${stream}`)
      const json: any = await response.json()
      assert.equal(json.code, 'INSUFFICIENT_CREDITS')
      assert.include(json.error, "This agent's monthly AI Credit budget of 1000 credits")
      assert.include(json.error, nextMonthStart())
    }
    assert.lengthOf(upstream.requests, 1, 'only the first call reached the provider')
  })

  test('the account budget refuses proxied calls of every agent and of API keys', async ({
    client,
    assert,
  }) => {
    const { owner, agent } = await ownerWithAgent()
    await client.put('/ai-credits/budget').bearerToken(jwtFor(owner)).json({ monthlyCredits: 500 })
    await spend(owner.id, 480)
    for (const token of [proxyTokenOf(agent), await apiKeyFor(owner)]) {
      const response = await proxyCall(token)
      assert.equal(response.status, 402)
      const json: any = await response.json()
      assert.include(json.error, "Your account's monthly AI Credit budget of 500 credits")
      assert.include(json.error, 'PUT /ai-credits/budget')
    }
    assert.lengthOf(upstream.requests, 0)

    await client.put('/ai-credits/budget').bearerToken(jwtFor(owner)).json({ monthlyCredits: null })
    assert.equal(await proxyStatus(proxyTokenOf(agent)), 200)
  })

  test('another agent of the same owner is not held to this agent budget', async ({ assert }) => {
    const { owner, agent } = await ownerWithAgent(1000)
    await spend(owner.id, 1000, agent.id)
    assert.equal(await proxyStatus(proxyTokenOf(agent)), 402)
    const other = await createAgentFor(owner, { config: { personality: 'No budget' } })
    assert.equal(await proxyStatus(proxyTokenOf(other)), 200)
  })

  test('at 80 % and 100 % one notification and one feed event each, once a month', async ({
    assert,
  }) => {
    const { owner, agent } = await ownerWithAgent(2000)
    const token = proxyTokenOf(agent)
    upstream.set({ usage: { prompt_tokens: 5, completion_tokens: 5 } })
    await spend(owner.id, 1590, agent.id)

    // 1590 + 15: past 80 % (and room left for the next hold).
    assert.equal(await proxyStatus(token), 200)
    let notes = await budgetNotifications(owner)
    assert.lengthOf(notes, 1)
    assert.include(notes[0].title, 'Agent "Fixture agent" has used 80 %')
    assert.include(notes[0].body, '1605 of 2000 AI Credits')
    // Crossing again in the same month changes nothing.
    assert.equal(await proxyStatus(token), 200)
    assert.lengthOf(await budgetNotifications(owner), 1)
    assert.lengthOf(await budgetFeed(owner, agent), 1)

    // 100 %: spent reaches the budget; refused calls after it alert no more.
    await spend(owner.id, 380, agent.id)
    assert.equal(await proxyStatus(token), 402)
    assert.equal(await proxyStatus(token), 402)
    notes = await budgetNotifications(owner)
    assert.lengthOf(notes, 2)
    assert.include(notes[0].title, 'has used its monthly AI Credit budget')
    const feed = await budgetFeed(owner, agent)
    assert.lengthOf(feed, 2)
    assert.include(feed[0].content, '100 % of 2000 credits')
    assert.include(feed[1].content, '80 % of 2000 credits')
  })

  test('raising the budget lets calls through again', async ({ assert }) => {
    const { owner, agent } = await ownerWithAgent(1000)
    const token = proxyTokenOf(agent)
    await spend(owner.id, 990, agent.id)
    assert.equal(await proxyStatus(token), 402)
    const raised = await patchAgentConfig(owner, agent, { budget: { monthlyCredits: 5000 } })
    assert.equal(raised.status, 200)
    assert.equal(await proxyStatus(token), 200)
  })

  test('a new month resets the spend', async ({ assert }) => {
    const { owner, agent } = await ownerWithAgent(1000)
    const token = proxyTokenOf(agent)
    await spend(owner.id, 1000, agent.id)
    assert.equal(await proxyStatus(token), 402)
    // Last month's spending does not count this month.
    await db
      .from('credit_ledger')
      .where('user_id', owner.id)
      .update({ created_at: db.raw(`date_trunc('month', now()) - interval '1 day'`) })
    assert.equal(await proxyStatus(token), 200)
  })

  test('concurrent calls never pass the budget together', async ({ assert }) => {
    const { owner, agent } = await ownerWithAgent(1000)
    const token = proxyTokenOf(agent)
    // Room for one hold of 204 credits, not two.
    await spend(owner.id, 780, agent.id)
    upstream.set({ replyDelayMs: 200 })
    const statuses = await Promise.all(Array.from({ length: 6 }, () => proxyStatus(token)))
    assert.isAtMost(statuses.filter((status) => status === 200).length, 1)
    assert.isTrue(statuses.every((status) => status === 200 || status === 402))
    const spent = await db
      .from('credit_ledger')
      .where('agent_id', agent.id)
      .where('credits', '<', 0)
      .sum('credits as total')
      .first()
    assert.isAtMost(-Number(spent.total), 1000)
  })

  test('a scheduled message is refused too: its run records the budget', async ({ assert }) => {
    const { owner, agent } = await ownerWithAgent(10_000)
    await spend(owner.id, 9_950, agent.id)
    const now = new Date()
    const [schedule] = await db
      .table('agent_schedules')
      .insert({
        agent_id: agent.id,
        name: 'Daily digest',
        cron: '0 9 * * *',
        timezone: 'UTC',
        message: 'digest please',
        next_run_at: new Date(now.getTime() - 1000),
      })
      .returning('*')
    await runDueSchedules(now)
    const runs = await db.from('agent_schedule_runs').where('schedule_id', schedule.id)
    const failed = runs.find((run) => run.status === 'error')
    assert.exists(failed)
    assert.include(failed.error, "This agent's monthly AI Credit budget of 10000")
    // runDueSchedules runs every due schedule in the database (other specs' too): only this
    // schedule's message must not have reached the provider.
    const mine = upstream.requests.filter((request) =>
      JSON.stringify(request.body).includes('digest please')
    )
    assert.lengthOf(mine, 0)
  })

  test('a channel message is answered with the budget notice instead of a model reply', async ({
    assert,
  }) => {
    const { owner, agent } = await ownerWithAgent(10_000)
    await spend(owner.id, 9_950, agent.id)
    const sent: string[] = []
    // The router uses the connector's name and message limit only.
    const plugin = { name: 'telegram', maxMessageLength: 4096 } as unknown as ChannelPlugin
    const outcome = await routeInbound(
      agent.id,
      plugin,
      { id: `m-${agent.id}`, conversationId: 'chat-1', sender: { id: '42' }, text: 'hello' },
      { send: async (_target, text) => void sent.push(text) }
    )
    assert.equal(outcome, 'failed')
    assert.deepEqual(sent, [OUT_OF_BUDGET_REPLY])
    assert.lengthOf(upstream.requests, 0)
  })
})
