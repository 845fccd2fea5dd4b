import { test } from '@japa/runner'
import Agent from '#agents/models/agent'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { apiKeyFor, jwtFor } from '#tests/helpers/identity'
import {
  callFixture,
  chatWithContainer,
  createFixtureAgent,
  runtime,
  waitUntilServing,
  agentOwners,
} from '#tests/helpers/agents_http'
import { waitFor } from '#tests/helpers/runtime'

const owners = agentOwners({ tier: 'pro' })
const owner = () => owners.create()

async function storedStatus(agentId: string) {
  const agent = await Agent.findOrFail(agentId)
  return agent.status
}

test.group('Agents: lifecycle through HTTP (fixture framework, process driver)', (group) => {
  group.teardown(async () => owners.removeAgents())

  test('start, stop, restart on both surfaces answer the result words and container ids', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const jwt = jwtFor(user)
    const key = await apiKeyFor(user)
    const agent = await createFixtureAgent(client, user, { config: { personality: 'Keeps' } })
    await waitUntilServing(agent.id)
    const service = await runtime()
    const running = await service.status(agent.id)

    // Starting a running agent changes nothing.
    const again = await client.post(`/api/v1/agents/${agent.id}/start`).bearerToken(key)
    again.assertStatus(200)
    assert.deepEqual(again.body().data, { status: 'started', containerId: running.containerId })

    const stop = await client.post(`/api/v1/agents/${agent.id}/stop`).bearerToken(key)
    stop.assertStatus(200)
    assert.deepEqual(stop.body().data, { status: 'stopped' })
    // Stored at once; the container stops in the background.
    assert.equal(await storedStatus(agent.id), 'stopped')
    await agentLifecycle.settled()
    assert.isFalse(await service.isRunning(agent.id))

    const status = await client.get(`/api/v1/agents/${agent.id}/status`).bearerToken(key)
    assert.equal(status.body().data.status, 'stopped')
    const stats = await client.get(`/agents/${agent.id}/stats`).bearerToken(jwt)
    stats.assertStatus(200)
    assert.deepInclude(stats.body().data, {
      status: 'stopped',
      uptimeSecs: 0,
      messagesProcessed: 0,
    })

    // Config survives a stop.
    const detail = await client.get(`/agents/${agent.id}`).bearerToken(jwt)
    assert.equal(detail.body().data.config.personality, 'Keeps')

    const start = await client.post(`/agents/${agent.id}/start`).bearerToken(jwt)
    start.assertStatus(200)
    assert.equal(start.body().data.status, 'started')
    assert.isString(start.body().data.containerId)
    assert.notEqual(start.body().data.containerId, running.containerId)
    assert.equal(await storedStatus(agent.id), 'active')
    await waitUntilServing(agent.id)

    const restart = await client.post(`/api/v1/agents/${agent.id}/restart`).bearerToken(key)
    restart.assertStatus(200)
    assert.equal(restart.body().data.status, 'restarted')
    assert.notEqual(restart.body().data.containerId, start.body().data.containerId)
    // The old run stops and the new one boots in the background.
    await agentLifecycle.settled()
    await waitUntilServing(agent.id)
    const info = await service.status(agent.id)
    assert.equal(info.containerId, restart.body().data.containerId)

    const dashboardRestart = await client.post(`/agents/${agent.id}/restart`).bearerToken(jwt)
    assert.equal(dashboardRestart.body().data.status, 'restarted')
    const dashboardStop = await client.post(`/agents/${agent.id}/stop`).bearerToken(jwt)
    assert.deepEqual(dashboardStop.body().data, { status: 'stopped' })
  })

  test('container-only views answer 409 AGENT_NOT_RUNNING when stopped', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const jwt = jwtFor(user)
    const agent = await createFixtureAgent(client, user)
    await waitUntilServing(agent.id)
    await client.post(`/agents/${agent.id}/stop`).bearerToken(jwt)

    const requests = [
      client.get(`/agents/${agent.id}/monitoring`),
      client.get(`/agents/${agent.id}/memory`),
      client.get(`/agents/${agent.id}/container-files`),
      client.get(`/agents/${agent.id}/container-files/read`).qs({ path: 'SOUL.md' }),
      client.put(`/agents/${agent.id}/container-files`).json({ path: 'a.txt', content: 'x' }),
      client
        .post(`/agents/${agent.id}/container-files/write`)
        .json({ path: 'a.txt', content: 'x' }),
      client.delete(`/agents/${agent.id}/container-files`).qs({ path: 'SOUL.md' }),
      client.delete(`/agents/${agent.id}/container-files/delete`).qs({ path: 'SOUL.md' }),
      client.get(`/agents/${agent.id}/logs`).qs({ stream: true }),
    ]
    for (const request of requests) {
      const response = await request.bearerToken(jwt)
      assert.equal(response.status(), 409)
      assert.equal(response.body().code, 'AGENT_NOT_RUNNING')
    }
    // Logs as text still work for a stopped agent.
    const logs = await client.get(`/agents/${agent.id}/logs`).bearerToken(jwt)
    logs.assertStatus(200)
    assert.include(logs.text(), 'listening on')
  })

  test('monitoring figures of the running container; a crash restarts it and counts', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const jwt = jwtFor(user)
    const agent = await createFixtureAgent(client, user)
    await waitUntilServing(agent.id)

    const first = await client.get(`/agents/${agent.id}/monitoring`).bearerToken(jwt)
    first.assertStatus(200)
    const figures = first.body().data
    assert.deepEqual(Object.keys(figures).sort(), [
      'container',
      'cpuPercent',
      'memoryLimitMb',
      'memoryMb',
      'restartCount',
      'status',
    ])
    assert.equal(figures.status, 'running')
    assert.equal(figures.container, 'running')
    assert.equal(figures.restartCount, 0)
    assert.equal(figures.memoryLimitMb, 256)
    // A Node process: tens of MB resident, well under the limit.
    assert.isAbove(figures.memoryMb, 10)
    assert.isBelow(figures.memoryMb, 256)
    assert.isAtLeast(figures.cpuPercent, 0)

    // Busy for 1.5 s: the CPU figure shows it.
    const burn = callFixture(agent.id, '/burn?ms=1500')
    const busy = await waitFor(
      'a CPU figure from the busy container',
      async () => {
        const response = await client.get(`/agents/${agent.id}/monitoring`).bearerToken(jwt)
        return response.body().data.cpuPercent > 20 && response.body().data.cpuPercent
      },
      5000
    )
    await burn
    assert.isAbove(busy, 20)

    const service = await runtime()
    const before = await service.status(agent.id)
    await chatWithContainer(agent.id, '__crash__').catch(() => {})
    await waitFor(
      'the crashed container to be restarted',
      async () => {
        const info = await service.status(agent.id)
        return info.state === 'running' && info.containerId !== before.containerId
      },
      15_000
    )
    await waitUntilServing(agent.id)
    const after = await client.get(`/agents/${agent.id}/monitoring`).bearerToken(jwt)
    assert.equal(after.body().data.restartCount, 1)
    assert.equal(await storedStatus(agent.id), 'active')

    const feed = await client.get(`/agents/${agent.id}/feed`).bearerToken(jwt)
    const events = feed.body().data.events as { type: string; content: string }[]
    assert.isTrue(
      events.some((event) => event.type === 'error' && event.content.includes('ended unexpectedly'))
    )
    assert.isTrue(
      events.some((event) => event.type === 'status_change' && event.content.includes('restarting'))
    )
  })

  test('memory is read from the framework store in the container', async ({ client, assert }) => {
    const user = await owner()
    const agent = await createFixtureAgent(client, user)
    await waitUntilServing(agent.id)
    await chatWithContainer(agent.id, '__remember__ favourite=blue')
    const response = await client.get(`/agents/${agent.id}/memory`).bearerToken(jwtFor(user))
    response.assertStatus(200)
    assert.deepEqual(response.body().data, { memory: { favourite: 'blue' } })
  })

  test('a framework that cannot start puts the agent in error with a feed event', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const jwt = jwtFor(user)
    const created = await client
      .post('/agents')
      .bearerToken(jwt)
      .json({ name: 'Cannot Launch', framework: 'fixture', config: { cannotLaunch: true } })
    created.assertStatus(201)
    const id = created.body().data.id
    await waitFor('the error status', async () => (await storedStatus(id)) === 'error', 15_000)
    await agentLifecycle.settled()
    const feed = await client.get(`/agents/${id}/feed`).bearerToken(jwt)
    const error = feed.body().data.events.find((event: { type: string }) => event.type === 'error')
    assert.exists(error)
    assert.include(error.content, 'cannot launch')

    // Answered at once; the launch fails again in the background and the state says so.
    const start = await client.post(`/agents/${id}/start`).bearerToken(jwt)
    assert.equal(start.status(), 200)
    assert.equal(await storedStatus(id), 'active')
    await agentLifecycle.settled()
    assert.equal(await storedStatus(id), 'error')
  })
})
