import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import Agent from '#agents/models/agent'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { apiKeyFor, jwtFor } from '#tests/helpers/identity'
import {
  agentOwners,
  createFixtureAgent,
  runtime,
  waitUntilServing,
} from '#tests/helpers/agents_http'
import { waitFor } from '#tests/helpers/runtime'

test.group('Sleep and wake (scale to zero)', (group) => {
  const owners = agentOwners({ credits: 10_000 })
  group.teardown(() => owners.removeAgents())

  test('an agent asleep keeps status active, holds no memory, serves files and memory from disk, and a message wakes it', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create()
    const jwt = jwtFor(owner)
    const key = await apiKeyFor(owner)
    const agent = await createFixtureAgent(client, owner)
    await waitUntilServing(agent.id)
    const running = await client.get(`/agents/${agent.id}/status`).bearerToken(jwt)
    assert.equal(running.body().data.container, 'running')
    await client
      .put(`/agents/${agent.id}/container-files`)
      .bearerToken(jwt)
      .json({ path: 'notes.txt', content: 'written while awake' })
      .then((answer) => answer.assertStatus(200))

    await agentLifecycle.sleep(agent.id)
    await agentLifecycle.settled()
    const service = await runtime()
    assert.isFalse(await service.isRunning(agent.id), 'its container stopped')

    const status = await client.get(`/agents/${agent.id}/status`).bearerToken(jwt)
    assert.deepInclude(status.body().data, { status: 'active', container: 'sleeping' })
    const monitoring = await client.get(`/agents/${agent.id}/monitoring`).bearerToken(jwt)
    monitoring.assertStatus(200)
    assert.deepInclude(monitoring.body().data, {
      memoryMb: 0,
      cpuPercent: 0,
      container: 'sleeping',
    })
    const stats = await client.get(`/agents/${agent.id}/stats`).bearerToken(jwt)
    assert.equal(stats.body().data.container, 'sleeping')
    const feed = await client.get(`/agents/${agent.id}/feed`).bearerToken(jwt)
    assert.isTrue(
      feed.body().data.events.some((event: any) => /asleep/.test(event.content)),
      'the feed says it fell asleep'
    )

    // Files and memory without waking it.
    const read = await client
      .get(`/agents/${agent.id}/container-files/read`)
      .qs({ path: 'notes.txt' })
      .bearerToken(jwt)
    read.assertStatus(200)
    assert.equal(read.body().data.content, 'written while awake')
    await client
      .put(`/agents/${agent.id}/container-files`)
      .bearerToken(jwt)
      .json({ path: 'asleep.txt', content: 'written while asleep' })
      .then((answer) => answer.assertStatus(200))
    const memory = await client.get(`/agents/${agent.id}/memory`).bearerToken(jwt)
    memory.assertStatus(200)
    assert.isFalse(await service.isRunning(agent.id), 'files and memory did not wake it')

    // A message is answered at once on the hosted path, and wakes the agent.
    const chat = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(key)
      .json({ message: 'Are you there?' })
    chat.assertStatus(200)
    assert.equal(chat.body().data.model, 'local-dev', 'answered by the hosted model while it wakes')
    await waitFor('the agent to wake', () => service.isRunning(agent.id), 20_000)
    await waitUntilServing(agent.id)
    const awake = await client.get(`/agents/${agent.id}/status`).bearerToken(jwt)
    assert.equal(awake.body().data.container, 'running')
    const stored = await Agent.findOrFail(agent.id)
    assert.isNull(stored.sleepingSince, 'no longer marked asleep')

    const fromContainer = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(key)
      .json({ message: 'And now?' })
    assert.equal(fromContainer.body().data.model, 'fixture', 'the woken container answers')
    const file = await client
      .get(`/agents/${agent.id}/container-files/read`)
      .qs({ path: 'asleep.txt' })
      .bearerToken(jwt)
    assert.equal(file.body().data.content, 'written while asleep', 'kept across the sleep')
  }).timeout(60_000)

  test('the idle check puts to sleep agents with no recent message, and only those', async ({
    client,
    assert,
  }) => {
    const idle = await createFixtureAgent(client, await owners.create(), { name: 'Idle agent' })
    const busy = await createFixtureAgent(client, await owners.create(), { name: 'Busy agent' })
    await waitUntilServing(idle.id)
    await waitUntilServing(busy.id)
    // A clock a minute ahead, an idle limit of 30 s: the busy agent's last message is "recent".
    const now = Date.now() + 60_000
    await db
      .from('agents')
      .where('id', busy.id)
      .update({ last_active_at: new Date(now - 5_000) })

    const slept = await agentLifecycle.sleepIdle(30_000, now)
    await agentLifecycle.settled()
    assert.include(slept, idle.id)
    assert.notInclude(slept, busy.id)
    const service = await runtime()
    assert.isFalse(await service.isRunning(idle.id))
    assert.isTrue(await service.isRunning(busy.id))
    const asleep = await Agent.findOrFail(idle.id)
    assert.isNotNull(asleep.sleepingSince)
    assert.equal(asleep.status, 'active')
  }).timeout(60_000)

  test('a stopped agent is not woken by a message and answers 409 for files', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create()
    const jwt = jwtFor(owner)
    const key = await apiKeyFor(owner)
    const agent = await createFixtureAgent(client, owner)
    await waitUntilServing(agent.id)
    await client.post(`/agents/${agent.id}/stop`).bearerToken(jwt)
    const chat = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(key)
      .json({ message: 'Hello?' })
    chat.assertStatus(200)
    await agentLifecycle.settled()
    const status = await client.get(`/agents/${agent.id}/status`).bearerToken(jwt)
    assert.deepInclude(status.body().data, { status: 'stopped', container: 'stopped' })
    const files = await client.get(`/agents/${agent.id}/container-files`).bearerToken(jwt)
    files.assertStatus(409)
    assert.equal(files.body().code, 'AGENT_NOT_RUNNING')
  }).timeout(60_000)
})
