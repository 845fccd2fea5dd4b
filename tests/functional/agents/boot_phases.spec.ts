import { test } from '@japa/runner'
import { definePlugin, type FrameworkPlugin, type ProcessLaunchTools } from '#plugins/types'
import { agentOwners, createFixtureAgent } from '#tests/helpers/agents_http'
import { jwtFor } from '#tests/helpers/identity'
import { processHarness, waitFor } from '#tests/helpers/runtime'

test.group('Boot phases: status and stats say where a start is, and since when', (group) => {
  const owners = agentOwners()
  group.teardown(() => owners.removeAgents())

  test('installing, then booting, then running; each with its own phaseSince', async ({
    assert,
    client,
  }) => {
    const owner = await owners.create()
    const jwt = jwtFor(owner)
    const agent = await createFixtureAgent(client, owner, {
      config: { installDelayMs: 1500, readyDelayMs: 1500 },
    })
    const status = async () => {
      const response = await client.get(`/agents/${agent.id}/status`).bearerToken(jwt)
      response.assertStatus(200)
      return response.body().data as Record<string, any>
    }
    const seen: Record<string, string> = {}
    await waitFor(
      'the agent to run',
      async () => {
        const answer = await status()
        if (answer.phaseSince) seen[answer.phase] ??= answer.phaseSince
        return answer.phase === 'running'
      },
      30_000
    )
    assert.properties(seen, ['installing', 'booting', 'running'])
    assert.isBelow(Date.parse(seen.installing), Date.parse(seen.booting))
    assert.isAtMost(Date.parse(seen.booting), Date.parse(seen.running))
    // The spec's fields stay as they were; phase comes beside them.
    const answer = await status()
    assert.equal(answer.container, 'running')
    assert.equal(answer.phaseSince, seen.running)

    const stats = await client.get(`/agents/${agent.id}/stats`).bearerToken(jwt)
    stats.assertStatus(200)
    assert.equal(stats.body().data.phase, 'running')
    assert.equal(stats.body().data.phaseSince, seen.running)
  }).timeout(60_000)

  test('a stopped agent: phase stopped, since the stop', async ({ assert, client }) => {
    const owner = await owners.create()
    const jwt = jwtFor(owner)
    const agent = await createFixtureAgent(client, owner)
    const before = Date.now()
    const stopped = await client.post(`/agents/${agent.id}/stop`).bearerToken(jwt)
    stopped.assertStatus(200)
    const answer = await waitFor('the stop to be seen', async () => {
      const response = await client.get(`/agents/${agent.id}/status`).bearerToken(jwt)
      const data = response.body().data
      return data.phase === 'stopped' && data.phaseSince ? data : false
    })
    assert.equal(answer.container, 'stopped')
    assert.isAtLeast(Date.parse(answer.phaseSince), before - 1000)
  }).timeout(60_000)
})

test.group('Boot phases: frameworks prepared at service start', () => {
  test('the process driver prepares each framework once with the shared caches; a failure is only logged', async ({
    assert,
  }) => {
    const harness = await processHarness()
    try {
      const calls: Array<{ name: string; tools: ProcessLaunchTools }> = []
      const plugin = (name: string, fail = false) =>
        definePlugin<FrameworkPlugin>({
          ...harness.registry.framework('fixture'),
          name,
          async prepareHost(tools) {
            calls.push({ name, tools })
            if (fail) throw new Error('registry unreachable')
          },
        })
      await harness.driver.prepareFrameworks([plugin('first', true), plugin('second')])
      assert.deepEqual(
        calls.map((call) => call.name),
        ['first', 'second']
      )
      assert.match(calls[1].tools.compileCache!.dir, /compile-cache$/)
      assert.equal(calls[1].tools.nodeExecutable, process.execPath)
    } finally {
      await harness.cleanup()
    }
  })
})
