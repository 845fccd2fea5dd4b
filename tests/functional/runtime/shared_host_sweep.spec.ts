import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { test } from '@japa/runner'
import { agentNetworkUnavailable } from '#runtime/process/agent_network/agent_networks'
import { agentNetworkSettings } from '#runtime/process/agent_network/network_settings'
import { fixtureSpec, processHarness, type RuntimeHarness } from '#tests/helpers/runtime'

/**
 * Network namespaces are host-wide (/run/netns/ah-<agent id>): a service's
 * boot sweep must remove its own idle ones only, never those another
 * service on the host (another storage) prepared for agents whose start is
 * under way (queued, or waiting for a template).
 */
const unavailable = agentNetworkUnavailable()

test.group('Runtime / two services on one host: the namespace sweep', (group) => {
  const harnesses: RuntimeHarness[] = []
  group.each.teardown(async () => {
    await Promise.all(harnesses.splice(0).map((harness) => harness.cleanup()))
  })

  test("a service's sweep leaves another service's prepared namespaces alone, and removes its own", async ({
    assert,
  }) => {
    // Any age counts as idle here: the sweep's only guard left is whose agent it is.
    const network = { ...agentNetworkSettings()!, sweepMinAgeMs: 0 }
    const first = await processHarness({ network })
    const second = await processHarness({ network })
    harnesses.push(first, second)

    // Prepared (its namespace made), not started: nothing runs in it yet.
    const agentId = randomUUID()
    await first.driver.create({
      spec: fixtureSpec(agentId),
      plugin: first.registry.framework('fixture'),
      gatewayToken: 'gateway-token-for-tests',
    })
    const namespace = `/run/netns/ah-${agentId}`
    assert.isTrue(existsSync(namespace), 'made at create')

    await second.driver.sweep([])
    assert.isTrue(existsSync(namespace), "another service's sweep left it")

    await first.driver.sweep([])
    assert.isFalse(existsSync(namespace), "its own service's sweep removed it (the agent is gone)")
  })
    .skip(unavailable !== undefined, unavailable)
    .timeout(60_000)
})
