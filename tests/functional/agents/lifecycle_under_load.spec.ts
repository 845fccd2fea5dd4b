import { test } from '@japa/runner'
import Agent from '#agents/models/agent'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { jwtFor } from '#tests/helpers/identity'
import { agentProcessIds } from '#tests/helpers/agent_processes'
import { agentOwners, createFixtureAgent, runtime } from '#tests/helpers/agents_http'
import { waitFor } from '#tests/helpers/runtime'

const owners = agentOwners({ tier: 'business' })

/** Long enough that a blocker holds its boot slot for the whole test. */
const HOLD_SLOT_MS = 120_000

async function storedStatus(agentId: string) {
  const agent = await Agent.findOrFail(agentId)
  return agent.status
}

/**
 * The boot queue made full with real boots: fixture agents whose framework
 * answers its readiness path only after `readyDelayMs` hold every boot slot
 * (AGENT_BOOT_CONCURRENCY, the number of cores by default), so the next
 * start waits in the queue.
 */
test.group('Agents: lifecycle answers at once with the boot queue full', (group) => {
  // Blockers hold boot slots for minutes: gone after each test, whatever it left.
  group.each.teardown(async () => owners.removeAgents())

  test('stop, start and restart of a queued agent: stored status at once, one container id from scheduling to running, one boot', async ({
    client,
    assert,
  }) => {
    const user = await owners.create()
    const jwt = jwtFor(user)
    const service = await runtime()
    const slots = service.capacity().bootConcurrency
    const blockers = []
    for (let index = 0; index < slots; index++) {
      blockers.push(
        await createFixtureAgent(client, user, {
          name: `Blocker ${index}`,
          config: { readyDelayMs: HOLD_SLOT_MS },
        })
      )
    }
    await waitFor('every boot slot taken', async () => service.capacity().booting >= slots, 30_000)

    const agent = await createFixtureAgent(client, user, { name: 'Queued' })
    const status = async () => {
      const response = await client.get(`/agents/${agent.id}/status`).bearerToken(jwt)
      return response.body().data as { status: string; container: string; containerId: unknown }
    }
    const container = async () => {
      const data = await status()
      return data.container
    }
    const containerId = async () => {
      const data = await status()
      return data.containerId
    }
    await waitFor('the agent to queue', async () => (await container()) === 'queued', 10_000)
    const queued = await status()
    assert.isString(queued.containerId, 'a queued run has its id already')

    // Starting it again answers the run already scheduled.
    const again = await client.post(`/agents/${agent.id}/start`).bearerToken(jwt)
    assert.deepEqual(again.body().data, { status: 'started', containerId: queued.containerId })

    const stop = await client.post(`/agents/${agent.id}/stop`).bearerToken(jwt)
    stop.assertStatus(200)
    assert.deepEqual(stop.body().data, { status: 'stopped' })
    assert.equal(await storedStatus(agent.id), 'stopped')
    assert.deepInclude(await status(), { status: 'stopped', container: 'stopped' })

    const start = await client.post(`/agents/${agent.id}/start`).bearerToken(jwt)
    start.assertStatus(200)
    const started = start.body().data
    assert.equal(started.status, 'started')
    assert.isString(started.containerId)
    assert.notEqual(started.containerId, queued.containerId)
    assert.equal(await storedStatus(agent.id), 'active')
    await waitFor('the start to queue', async () => (await container()) === 'queued', 10_000)
    assert.equal(await containerId(), started.containerId)
    const stats = await client.get(`/agents/${agent.id}/stats`).bearerToken(jwt)
    assert.equal(stats.body().data.containerId, started.containerId)

    const restart = await client.post(`/agents/${agent.id}/restart`).bearerToken(jwt)
    restart.assertStatus(200)
    const restarted = restart.body().data
    assert.equal(restarted.status, 'restarted')
    assert.isString(restarted.containerId)
    assert.notEqual(restarted.containerId, started.containerId)
    await waitFor(
      'status to name the restart',
      async () => (await containerId()) === restarted.containerId,
      10_000
    )

    // Slots free: it boots once, under the id the restart answered.
    for (const blocker of blockers) {
      await client.post(`/agents/${blocker.id}/stop`).bearerToken(jwt)
    }
    await waitFor('the agent to run', async () => (await container()) === 'running', 30_000)
    assert.equal(await containerId(), restarted.containerId)
    await agentLifecycle.settled()
    await agentLifecycle.eventsStored()

    const feed = await client.get(`/agents/${agent.id}/feed`).bearerToken(jwt)
    const changes = (feed.body().data.events as any[])
      .filter((event) => event.type === 'status_change')
      .map((event) => [event.content, event.from, event.to])
      .reverse()
    assert.deepEqual(changes, [
      ['Agent stopped', 'active', 'stopped'],
      ['Agent started', 'stopped', 'active'],
      ['Container launched', null, 'starting'],
      ['Container running', 'starting', 'running'],
    ])
  }).timeout(120_000)

  test('a stop cancels a running boot; a restart of a booting agent boots it once', async ({
    client,
    assert,
  }) => {
    const user = await owners.create()
    const jwt = jwtFor(user)
    const service = await runtime()

    // Booting (launched, not ready yet): a stop answers and the process goes.
    const booting = await createFixtureAgent(client, user, {
      name: 'Booting',
      config: { readyDelayMs: HOLD_SLOT_MS },
    })
    await waitFor('its process', async () => agentProcessIds(booting.id).length > 0, 30_000)
    assert.equal(await service.containerView(booting.id), 'starting')
    const stop = await client.post(`/agents/${booting.id}/stop`).bearerToken(jwt)
    assert.deepEqual(stop.body().data, { status: 'stopped' })
    await agentLifecycle.settled()
    assert.deepEqual(agentProcessIds(booting.id), [])
    assert.equal(await storedStatus(booting.id), 'stopped')

    // Restarted while it boots: one more boot, under the new id.
    const slow = await createFixtureAgent(client, user, {
      name: 'Slow',
      config: { readyDelayMs: 2_000 },
    })
    await waitFor('its process', async () => agentProcessIds(slow.id).length > 0, 30_000)
    const first = await service.status(slow.id)
    const restart = await client.post(`/agents/${slow.id}/restart`).bearerToken(jwt)
    const restartedId = restart.body().data.containerId
    assert.notEqual(restartedId, first.containerId)
    await waitFor(
      'the restarted run to be ready',
      async () => {
        const response = await client.get(`/agents/${slow.id}/status`).bearerToken(jwt)
        const body = response.body().data
        return body.container === 'running' && body.containerId === restartedId
      },
      30_000
    )
    await agentLifecycle.settled()
    await agentLifecycle.eventsStored()
    const feed = await client.get(`/agents/${slow.id}/feed`).bearerToken(jwt)
    const launches = (feed.body().data.events as any[]).filter(
      (event) => event.content === 'Container launched'
    )
    assert.lengthOf(launches, 2, 'the first boot and the restart: not zero, not three')
  }).timeout(120_000)
})
