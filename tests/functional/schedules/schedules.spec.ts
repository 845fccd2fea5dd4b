import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { runDueSchedules } from '#schedules/services/schedule_service'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import {
  agentOwners,
  putToSleep,
  servingFixtureAgent,
  waitUntilServing,
} from '#tests/helpers/agents_http'
import { creditsOf, createUser, jwtFor } from '#tests/helpers/identity'
import { startModelUpstream, useUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'

async function ownerWithAgent(
  options: { tier?: 'free' | 'pro'; status?: 'active' | 'stopped' } = {}
) {
  const owner = await createUser({ tier: options.tier, credits: 1000 })
  const agent = await createAgentFor(owner, { status: options.status ?? 'active' })
  return { owner, agent, jwt: jwtFor(owner) }
}

/** Makes the task due at `at` (a controlled clock, no waiting). */
async function makeDue(scheduleId: string, at: Date) {
  await db.from('agent_schedules').where('id', scheduleId).update({ next_run_at: at })
}

/** The start of `at`'s UTC hour: an hourly or daily slot already past, with none missed since. */
function slotStart(at: Date): Date {
  const start = new Date(at)
  start.setUTCMinutes(0, 0, 0)
  return start
}

async function runsOf(scheduleId: string) {
  return db
    .from('agent_schedule_runs')
    .where('schedule_id', scheduleId)
    .orderBy('started_at', 'asc')
}

test.group('Schedules: routes and validation', () => {
  test('create, list, pause, resume and delete; times in UTC from the task time zone', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerWithAgent()
    const created = await client.post(`/agents/${agent.id}/schedules`).bearerToken(jwt).json({
      name: 'Morning',
      cron: '0 9 * * *',
      message: 'Good morning',
      timezone: 'Europe/Paris',
    })
    created.assertStatus(201)
    const task = created.body().data
    assert.include(task, { name: 'Morning', cron: '0 9 * * *', enabled: true, lastRunAt: null })
    const next = new Date(task.nextRunAt)
    assert.isAbove(next.getTime(), Date.now())
    const parisHour = new Intl.DateTimeFormat('en-GB', {
      timeZone: 'Europe/Paris',
      hour: '2-digit',
      hour12: false,
    }).format(next)
    assert.equal(parisHour, '09', '09:00 in Paris, stored in UTC')
    assert.equal(next.getUTCMinutes(), 0)

    const list = await client.get(`/agents/${agent.id}/schedules`).bearerToken(jwt)
    assert.deepEqual(
      list.body().data.map((t: any) => t.id),
      [task.id]
    )

    const paused = await client
      .post(`/agents/${agent.id}/schedules/${task.id}/pause`)
      .bearerToken(jwt)
    assert.include(paused.body().data, { enabled: false, nextRunAt: null })
    const resumed = await client
      .post(`/agents/${agent.id}/schedules/${task.id}/resume`)
      .bearerToken(jwt)
    assert.equal(resumed.body().data.enabled, true)
    assert.isNotNull(resumed.body().data.nextRunAt)

    const deleted = await client.delete(`/agents/${agent.id}/schedules/${task.id}`).bearerToken(jwt)
    deleted.assertStatus(200)
    const again = await client.delete(`/agents/${agent.id}/schedules/${task.id}`).bearerToken(jwt)
    again.assertStatus(404)
  })

  test('a bad expression, an unknown zone, runs too close together and too many tasks are 400 saying which', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerWithAgent()
    const create = (body: Record<string, unknown>) =>
      client
        .post(`/agents/${agent.id}/schedules`)
        .bearerToken(jwt)
        .json({ name: 'Task', message: 'Hi', cron: '@hourly', ...body })

    const badCron = await create({ cron: '61 * * * *' })
    badCron.assertStatus(400)
    assert.match(badCron.body().error, /^cron:/)
    const badZone = await create({ timezone: 'Mars/Olympus' })
    badZone.assertStatus(400)
    assert.match(badZone.body().error, /^timezone:/)
    const tooOften = await create({ cron: '* * * * *' })
    tooOften.assertStatus(400)
    assert.match(tooOften.body().error, /every 5 minutes/)

    const first = await create({ cron: '@hourly' })
    first.assertStatus(201)
    const second = await create({ cron: '@daily' })
    second.assertStatus(201)
    const third = await create({ cron: '@weekly' })
    third.assertStatus(400)
    assert.match(third.body().error, /allows 2 scheduled tasks/)
  })

  test("another account's agent is 403; an unknown task is 404", async ({ client }) => {
    const { agent } = await ownerWithAgent()
    const stranger = jwtFor(await createUser())
    const foreign = await client.get(`/agents/${agent.id}/schedules`).bearerToken(stranger)
    foreign.assertStatus(403)
    const { agent: mine, jwt } = await ownerWithAgent()
    const unknown = await client
      .post(`/agents/${mine.id}/schedules/00000000-0000-0000-0000-000000000000/pause`)
      .bearerToken(jwt)
    unknown.assertStatus(404)
  })
})

test.group('Schedules: runs', () => {
  test('a due task sends its message through the chat service, records the run and moves on', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await ownerWithAgent()
    const created = await client
      .post(`/agents/${agent.id}/schedules`)
      .bearerToken(jwt)
      .json({ name: 'Ping', cron: '@hourly', message: 'Scheduled hello' })
    const task = created.body().data
    const now = new Date()
    await makeDue(task.id, slotStart(now))

    assert.isAtLeast(await runDueSchedules(now), 1)
    const runs = await client.get(`/agents/${agent.id}/schedules/${task.id}/runs`).bearerToken(jwt)
    const [run] = runs.body().data.runs
    assert.equal(run.status, 'ok')
    assert.include(run.replyExcerpt, 'Scheduled hello', 'the local-dev model echoes the message')

    const history = await client.get(`/agents/${agent.id}/chat/history`).bearerToken(jwt)
    assert.isTrue(
      history
        .body()
        .data.messages.some((m: any) => m.role === 'user' && m.content === 'Scheduled hello')
    )
    const feed = await client.get(`/agents/${agent.id}/feed`).bearerToken(jwt)
    assert.isTrue(feed.body().data.events.some((e: any) => /via schedule/.test(e.content)))
    const listed = await client.get(`/agents/${agent.id}/schedules`).bearerToken(jwt)
    const after = listed.body().data[0]
    assert.isNotNull(after.lastRunAt)
    assert.isAbove(new Date(after.nextRunAt).getTime(), now.getTime())
    assert.equal(await runDueSchedules(now), 0, 'not due again')
  })

  test('after downtime a task runs once and records the slots it missed', async ({ assert }) => {
    const { agent, jwt, owner } = await ownerWithAgent()
    void owner
    const [row] = await db
      .table('agent_schedules')
      .insert({
        agent_id: agent.id,
        name: 'Hourly',
        cron: '0 * * * *',
        timezone: 'UTC',
        message: 'tick',
      })
      .returning('*')
    void jwt
    const now = new Date('2026-11-24T12:30:00Z')
    await makeDue(row.id, new Date('2026-11-24T09:00:00Z'))
    await runDueSchedules(now)
    const runs = await runsOf(row.id)
    assert.deepEqual(
      runs.map((run) => run.status).sort(),
      ['ok', 'skipped'],
      'one run, one note of the skipped slots'
    )
    const skipped = runs.find((run) => run.status === 'skipped')
    assert.match(skipped.error, /^3 earlier runs missed/)
  })

  test('two scheduler instances racing on one database run a due task once', async ({ assert }) => {
    const { agent } = await ownerWithAgent()
    const [row] = await db
      .table('agent_schedules')
      .insert({
        agent_id: agent.id,
        name: 'Race',
        cron: '@hourly',
        timezone: 'UTC',
        message: 'race',
      })
      .returning('*')
    const now = new Date()
    await makeDue(row.id, new Date(now.getTime() - 1000))
    await Promise.all([runDueSchedules(now, 'instance-a'), runDueSchedules(now, 'instance-b')])
    const runs = await runsOf(row.id)
    assert.lengthOf(
      runs.filter((run) => run.status === 'ok'),
      1
    )
  })

  test('a paused task does not run; a stopped agent skips with the reason', async ({ assert }) => {
    const { agent } = await ownerWithAgent({ status: 'stopped' })
    const rows = await db
      .table('agent_schedules')
      .insert([
        { agent_id: agent.id, name: 'On', cron: '@hourly', timezone: 'UTC', message: 'on' },
        {
          agent_id: agent.id,
          name: 'Off',
          cron: '@hourly',
          timezone: 'UTC',
          message: 'off',
          enabled: false,
        },
      ])
      .returning('*')
    const now = new Date()
    for (const row of rows) await makeDue(row.id, new Date(now.getTime() - 1000))
    await runDueSchedules(now)
    const [on, off] = rows
    const onRuns = await runsOf(on.id)
    assert.lengthOf(onRuns, 1)
    assert.equal(onRuns[0].status, 'skipped')
    assert.match(onRuns[0].error, /agent is stopped/)
    assert.lengthOf(await runsOf(off.id), 0)
  })
})

test.group('Schedules: a sleeping agent, the container path and metering', (group) => {
  const owners = agentOwners({ credits: 10_000 })
  let upstream: ModelUpstream
  let restore: () => void
  group.setup(async () => {
    upstream = await startModelUpstream()
    restore = useUpstream(upstream, {
      rates: { 'metered-model': { input: 1_000_000, output: 2_000_000 } },
    })
    return async () => {
      restore()
      await upstream.close()
      await owners.removeAgents()
    }
  })
  group.each.setup(() => upstream.reset())

  test('a due task wakes a sleeping agent (the hosted path answers meanwhile); once awake, its container answers', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await servingFixtureAgent(client, await owners.create())
    const created = await client
      .post(`/agents/${agent.id}/schedules`)
      .bearerToken(jwt)
      .json({ name: 'Wake', cron: '@hourly', message: 'Scheduled while asleep' })
    created.assertStatus(201)
    const task = created.body().data
    const service = await putToSleep(agent.id)
    assert.isFalse(await service.isRunning(agent.id), 'asleep before the run')

    const first = new Date()
    await makeDue(task.id, slotStart(first))
    assert.isAtLeast(await runDueSchedules(first), 1)
    const [asleepRun] = await runsOf(task.id)
    assert.equal(asleepRun.status, 'ok', asleepRun.error ?? '')
    assert.lengthOf(upstream.requests, 1, 'answered by the hosted model while it wakes')
    await waitUntilServing(agent.id, 30_000)

    // The next slot finds it awake: the agent's own framework answers.
    const second = new Date()
    await makeDue(task.id, slotStart(second))
    assert.isAtLeast(await runDueSchedules(second), 1)
    const runs = await client.get(`/agents/${agent.id}/schedules/${task.id}/runs`).bearerToken(jwt)
    const [latest] = runs.body().data.runs
    assert.equal(latest.status, 'ok', latest.error ?? '')
    // When it was not: what its container did meanwhile, on the failure's first line.
    let why = ''
    if (latest.replyExcerpt !== 'echo: Scheduled while asleep') {
      const log = await service.logs(agent.id, { tail: 12 })
      why = ` (running: ${await service.isRunning(agent.id)}; its log ends: ${log.replace(/\s+/g, ' ')})`
    }
    assert.equal(
      latest.replyExcerpt,
      'echo: Scheduled while asleep',
      `the fixture framework answered${why}`
    )
    assert.lengthOf(upstream.requests, 1, 'no second hosted call')
  }).timeout(90_000)

  test('a run on the hosted path is metered on the owner, with source schedule in the ledger', async ({
    client,
    assert,
  }) => {
    const user = await owners.create()
    const jwt = jwtFor(user)
    const agent = await createAgentFor(user, { config: { model: 'metered-model' } })
    upstream.set({
      reply: 'Daily digest ready.',
      usage: { prompt_tokens: 40, completion_tokens: 7 },
    })
    const created = await client
      .post(`/agents/${agent.id}/schedules`)
      .bearerToken(jwt)
      .json({ name: 'Digest', cron: '@hourly', message: 'Write the daily digest' })
    const task = created.body().data
    const now = new Date()
    await makeDue(task.id, slotStart(now))
    const before = await creditsOf(user)

    assert.isAtLeast(await runDueSchedules(now), 1)
    const [run] = await runsOf(task.id)
    assert.equal(run.status, 'ok', run.error ?? '')
    assert.equal(run.reply_excerpt, 'Daily digest ready.')
    assert.equal(upstream.requests[0].body.model, 'metered-model')
    const cost = 40 * 1 + 7 * 2
    assert.equal(await creditsOf(user), before - cost)

    const [entry] = await db
      .from('credit_ledger')
      .where({ user_id: user.id, kind: 'llm' })
      .orderBy('seq', 'desc')
    assert.equal(entry.credits, -cost)
    assert.deepInclude(entry.metadata, { source: 'schedule', agentId: agent.id })
    const history = await client.get('/ai-credits/history').bearerToken(jwt)
    history.assertStatus(200)
    assert.deepInclude(history.body().data.usage[0], {
      kind: 'llm',
      model: 'metered-model',
      credits: cost,
      inputTokens: 40,
      outputTokens: 7,
    })
  })
})
