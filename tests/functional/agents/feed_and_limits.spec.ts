import { test } from '@japa/runner'
import Agent from '#agents/models/agent'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { recordFeedEvent } from '#agents/services/feed_service'
import { enforceAgentLimit } from '#billing/services/agent_limit_enforcer'
import User from '#identity/models/user'
import { jwtFor } from '#tests/helpers/identity'
import {
  createFixtureAgent,
  runtime,
  statusOf,
  waitUntilServing,
  agentOwners,
} from '#tests/helpers/agents_http'
import { waitFor } from '#tests/helpers/runtime'

const owners = agentOwners({ tier: 'pro' })
const owner = (tier: 'pro' | 'free' = 'pro') => owners.create({ tier })

async function statusesOf(ids: string[]) {
  const agents = await Agent.query().whereIn('id', ids)
  return Object.fromEntries(agents.map((agent) => [agent.id, agent.status]))
}

async function setTier(user: User, tier: 'pro' | 'free') {
  const fresh = await User.findOrFail(user.id)
  fresh.tier = tier
  await fresh.save()
}

test.group('Agents: feed, plan limit pausing, boot recovery', (group) => {
  group.teardown(async () => owners.removeAgents())

  test('the feed holds status changes and messages, newest first', async ({ client, assert }) => {
    const user = await owner()
    const jwt = jwtFor(user)
    const agent = await createFixtureAgent(client, user)
    await waitUntilServing(agent.id)
    await client.post(`/agents/${agent.id}/stop`).bearerToken(jwt)
    await agentLifecycle.settled()
    await recordFeedEvent(agent.id, { type: 'message', content: 'Answered a question' })

    const response = await client.get(`/agents/${agent.id}/feed`).bearerToken(jwt)
    response.assertStatus(200)
    const events = response.body().data.events as {
      type: string
      content: string
      ts: string
      from?: string | null
      to?: string
    }[]
    // Each transition once, stored status and container state alike, with from and to.
    assert.deepEqual(
      events.map((event) => [event.type, event.content, event.from, event.to]),
      [
        ['message', 'Answered a question', undefined, undefined],
        ['status_change', 'Container stopped', 'running', 'stopped'],
        ['status_change', 'Agent stopped', 'active', 'stopped'],
        ['status_change', 'Container running', 'starting', 'running'],
        ['status_change', 'Container launched', null, 'starting'],
      ]
    )
    assert.match(events[0].ts, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)

    const stranger = await owner()
    assert.equal(
      await statusOf(client.get(`/agents/${agent.id}/feed`).bearerToken(jwtFor(stranger))),
      403
    )
  })

  test('a shrinking limit pauses the newest agents and stops them; growing resumes them', async ({
    client,
    assert,
  }) => {
    const user = await owner('pro')
    const jwt = jwtFor(user)
    const oldest = await createFixtureAgent(client, user, { name: 'Oldest' })
    const middle = await createFixtureAgent(client, user, { name: 'Middle' })
    const newest = await createFixtureAgent(client, user, { name: 'Newest' })
    const ids = [oldest.id, middle.id, newest.id]
    for (const id of ids) await waitUntilServing(id)
    const service = await runtime()

    // The plan lapses to free (1 agent): billing applies the limit and announces it.
    await setTier(user, 'free')
    const change = await enforceAgentLimit(user.id, { limitChanged: true })
    assert.sameMembers(change.paused, [middle.id, newest.id])
    assert.deepEqual(await statusesOf(ids), {
      [oldest.id]: 'active',
      [middle.id]: 'paused',
      [newest.id]: 'paused',
    })
    await waitFor('the paused containers to stop', async () => {
      const running = await Promise.all([middle.id, newest.id].map((id) => service.isRunning(id)))
      return running.every((value) => !value)
    })
    assert.isTrue(await service.isRunning(oldest.id))

    // A paused agent cannot be started until the plan allows it; stopping keeps it paused.
    const start = await client.post(`/agents/${newest.id}/start`).bearerToken(jwt)
    assert.equal(start.status(), 400)
    assert.equal(start.body().code, 'VALIDATION_ERROR')
    assert.include(start.body().error, 'paused')
    assert.equal(await statusOf(client.post(`/agents/${newest.id}/restart`).bearerToken(jwt)), 400)
    assert.equal(await statusOf(client.post(`/agents/${newest.id}/stop`).bearerToken(jwt)), 200)
    const listed = await client.get('/agents').bearerToken(jwt)
    const statuses = listed.body().data.agents.map((item: { status: string }) => item.status)
    assert.deepEqual(statuses, ['paused', 'paused', 'active'])
    // Container events are stored as the runtime reports them, a moment after the stop.
    await agentLifecycle.settled()
    await agentLifecycle.eventsStored()
    const feed = await client.get(`/agents/${newest.id}/feed`).bearerToken(jwt)
    assert.includeDeepMembers(
      feed
        .body()
        .data.events.map((event: { type: string; content: string }) => [event.type, event.content]),
      [
        ['status_change', 'Agent paused: the plan allows fewer agents'],
        ['status_change', 'Container stopped'],
      ]
    )

    // Back on pro: both resume and run again.
    await setTier(user, 'pro')
    const resumed = await enforceAgentLimit(user.id, { limitChanged: true })
    assert.sameMembers(resumed.resumed, [middle.id, newest.id])
    await waitFor(
      'the resumed containers to run',
      async () => {
        const running = await Promise.all(ids.map((id) => service.isRunning(id)))
        return running.every(Boolean)
      },
      20_000
    )
    assert.deepEqual(Object.values(await statusesOf(ids)), ['active', 'active', 'active'])
  })

  test('boot recovery starts the containers of active agents, not of stopped ones', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const jwt = jwtFor(user)
    const active = await createFixtureAgent(client, user, { name: 'Should run' })
    const stopped = await createFixtureAgent(client, user, { name: 'Stays stopped' })
    await waitUntilServing(active.id)
    await waitUntilServing(stopped.id)
    await client.post(`/agents/${stopped.id}/stop`).bearerToken(jwt)

    // The active agent's process went away while the service was down.
    const service = await runtime()
    await service.stop(active.id)
    assert.isFalse(await service.isRunning(active.id))

    const result = await agentLifecycle.recover({ agentIds: [active.id, stopped.id] })
    assert.deepEqual(result.started, [active.id])
    assert.deepEqual(result.failed, [])
    await waitUntilServing(active.id)
    assert.isFalse(await service.isRunning(stopped.id))
  })
})
