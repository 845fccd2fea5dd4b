import { randomUUID } from 'node:crypto'
import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import Agent from '#agents/models/agent'
import { chatConfig } from '#config/chat'
import { pruneStoredMessages } from '#chat/services/history_service'
import { runJobExclusively, registeredJobs } from '#core/jobs/periodic_jobs'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners } from '#tests/helpers/agents_http'
import { apiKeyFor, jwtFor } from '#tests/helpers/identity'

const owners = agentOwners({ tier: 'pro', credits: 100 })
const owner = () => owners.create()

const DAY = 24 * 60 * 60_000

function utcDate(offsetDays: number): string {
  return new Date(Date.now() + offsetDays * DAY).toISOString().slice(0, 10)
}

async function insertMessages(agentId: string, count: number, at: (i: number) => Date) {
  const rows = Array.from({ length: count }, (_, i) => ({
    id: randomUUID(),
    agent_id: agentId,
    role: i % 2 ? 'assistant' : 'user',
    content: `old message ${i}`,
    created_at: at(i),
  }))
  for (let i = 0; i < rows.length; i += 500) {
    await db.table('chat_messages').multiInsert(rows.slice(i, i + 500))
  }
}

test.group('Chat history routes', (group) => {
  group.teardown(async () => owners.removeAgents())

  test('GET answers stored messages oldest first with ts in Unix ms; POST replaces; DELETE clears', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const jwt = jwtFor(user)
    const before = Date.now()
    const chat = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(await apiKeyFor(user))
      .json({ message: 'Remember me' })
    chat.assertStatus(200)

    const history = await client.get(`/agents/${agent.id}/chat/history`).bearerToken(jwt)
    history.assertStatus(200)
    const messages = history.body().data.messages
    assert.lengthOf(messages, 2)
    assert.deepEqual(
      messages.map((message: any) => [message.role, message.content]),
      [
        ['user', 'Remember me'],
        ['assistant', chat.body().data.content],
      ]
    )
    for (const message of messages) {
      assert.isTrue(Number.isInteger(message.ts))
      assert.isAtLeast(message.ts, before - 1000)
      assert.isAtMost(message.ts, Date.now() + 1000)
    }
    assert.isAtMost(messages[0].ts, messages[1].ts)

    const replaced = await client
      .post(`/agents/${agent.id}/chat/history`)
      .bearerToken(jwt)
      .json({
        messages: [
          { role: 'user', content: 'New start' },
          { role: 'assistant', content: 'Fresh reply' },
          { role: 'user', content: 'Third' },
        ],
      })
    replaced.assertStatus(200)
    assert.deepEqual(replaced.body().data, { saved: 3 })
    const after = await client.get(`/agents/${agent.id}/chat/history`).bearerToken(jwt)
    assert.deepEqual(
      after.body().data.messages.map((message: any) => message.content),
      ['New start', 'Fresh reply', 'Third']
    )

    const cleared = await client.delete(`/agents/${agent.id}/chat/history`).bearerToken(jwt)
    cleared.assertStatus(200)
    assert.deepEqual(cleared.body().data, { cleared: true })
    const empty = await client.get(`/agents/${agent.id}/chat/history`).bearerToken(jwt)
    assert.deepEqual(empty.body().data, { messages: [] })

    // Counting is about processed messages: replacing or clearing history keeps it.
    const stored = await Agent.findOrFail(agent.id)
    assert.equal(stored.messageCount, 1)
  })

  test('POST validates roles, content and the 200-message cap; other accounts get 403', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const jwt = jwtFor(user)
    for (const body of [
      {},
      { messages: 'x' },
      { messages: [{ role: 'system', content: 'x' }] },
      { messages: [{ role: 'user' }] },
      { messages: Array.from({ length: 201 }, () => ({ role: 'user', content: 'x' })) },
    ]) {
      const response = await client
        .post(`/agents/${agent.id}/chat/history`)
        .bearerToken(jwt)
        .json(body)
      response.assertStatus(400)
      assert.equal(response.body().code, 'VALIDATION_ERROR')
    }
    const stranger = await owner()
    for (const method of ['get', 'delete'] as const) {
      const response = await client[method](`/agents/${agent.id}/chat/history`).bearerToken(
        jwtFor(stranger)
      )
      response.assertStatus(403)
    }
    const analytics = await client
      .get(`/agents/${agent.id}/analytics`)
      .bearerToken(jwtFor(stranger))
    analytics.assertStatus(403)
  })

  test('the stored conversation keeps the newest 200 messages: a new exchange trims the oldest', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const jwt = jwtFor(user)
    const full = Array.from({ length: 200 }, (_, i) => ({
      role: i % 2 ? 'assistant' : 'user',
      content: `message ${i}`,
    }))
    const saved = await client.post(`/agents/${agent.id}/chat/history`).bearerToken(jwt).json({
      messages: full,
    })
    assert.deepEqual(saved.body().data, { saved: 200 })

    const chat = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(await apiKeyFor(user))
      .json({ message: 'One more' })
    chat.assertStatus(200)
    const history = await client.get(`/agents/${agent.id}/chat/history`).bearerToken(jwt)
    const contents = history.body().data.messages.map((message: any) => message.content)
    assert.lengthOf(contents, 200)
    assert.equal(contents[0], 'message 2')
    assert.deepEqual(contents.slice(-3), ['message 199', 'One more', chat.body().data.content])
    const rows = await db.from('chat_messages').where('agent_id', agent.id).count('* as total')
    assert.equal(Number(rows[0].total), 200)
  })

  test('the chat context is the newest 40 stored turns, oldest first', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const turns = Array.from({ length: 60 }, (_, i) => ({
      role: i % 2 ? 'assistant' : 'user',
      content: `turn ${i}`,
    }))
    await client.post(`/agents/${agent.id}/chat/history`).bearerToken(jwtFor(user)).json({
      messages: turns,
    })
    const { recentTurns } = await import('#chat/services/history_service')
    const context = await recentTurns(agent.id, chatConfig.historyMaxEntries)
    assert.lengthOf(context, 40)
    assert.equal(context[0].content, 'turn 20')
    assert.equal(context[39].content, 'turn 59')
  })

  test('the pruning job removes messages older than 30 days and trims agents over 200', async ({
    assert,
  }) => {
    const user = await owner()
    const old = await createAgentFor(user)
    const busy = await createAgentFor(user)
    const now = Date.now()
    await insertMessages(old.id, 10, (i) => new Date(now - 31 * DAY + i))
    await insertMessages(old.id, 4, (i) => new Date(now - 29 * DAY + i))
    // Over the cap (written behind the service's back) and active today.
    await insertMessages(busy.id, 260, (i) => new Date(now - 60_000 + i))
    await db.table('chat_daily_counts').insert({ agent_id: busy.id, day: utcDate(0), messages: 1 })

    const job = registeredJobs().find((candidate) => candidate.name === 'chat.prune_messages')
    assert.exists(job)
    assert.isTrue(await runJobExclusively(job!))

    const oldLeft = await db.from('chat_messages').where('agent_id', old.id)
    assert.lengthOf(oldLeft, 4)
    const busyLeft = await db
      .from('chat_messages')
      .where('agent_id', busy.id)
      .orderBy('created_at', 'asc')
    assert.lengthOf(busyLeft, 200)
    assert.equal(busyLeft[0].content, 'old message 60')
    // Idempotent: a second run changes nothing.
    await pruneStoredMessages()
    assert.lengthOf(await db.from('chat_messages').where('agent_id', busy.id), 200)
  })
})

test.group('GET /agents/:id/analytics', (group) => {
  group.teardown(async () => owners.removeAgents())

  test('the last 7 UTC days including today, zero-filled, with total, peak and avgPerDay', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    await db.table('chat_daily_counts').multiInsert([
      { agent_id: agent.id, day: utcDate(-8), messages: 50 },
      { agent_id: agent.id, day: utcDate(-7), messages: 40 },
      { agent_id: agent.id, day: utcDate(-6), messages: 3 },
      { agent_id: agent.id, day: utcDate(-3), messages: 9 },
    ])
    const key = await apiKeyFor(user)
    for (const message of ['one', 'two']) {
      const response = await client
        .post(`/api/v1/agents/${agent.id}/chat`)
        .bearerToken(key)
        .json({ message })
      response.assertStatus(200)
    }
    // Clearing history does not change analytics.
    await client.delete(`/agents/${agent.id}/chat/history`).bearerToken(jwtFor(user))

    const response = await client.get(`/agents/${agent.id}/analytics`).bearerToken(jwtFor(user))
    response.assertStatus(200)
    assert.deepEqual(response.body().data, {
      days: [
        { date: utcDate(-6), messages: 3 },
        { date: utcDate(-5), messages: 0 },
        { date: utcDate(-4), messages: 0 },
        { date: utcDate(-3), messages: 9 },
        { date: utcDate(-2), messages: 0 },
        { date: utcDate(-1), messages: 0 },
        { date: utcDate(0), messages: 2 },
      ],
      total: 14,
      peak: 9,
      avgPerDay: 2,
    })
  })

  test('a new agent has seven zero days', async ({ client, assert }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const response = await client.get(`/agents/${agent.id}/analytics`).bearerToken(jwtFor(user))
    response.assertStatus(200)
    const data = response.body().data
    assert.lengthOf(data.days, 7)
    assert.isTrue(data.days.every((day: any) => day.messages === 0))
    assert.deepInclude(data, { total: 0, peak: 0, avgPerDay: 0 })
    assert.equal(data.days[6].date, utcDate(0))
  })
})
