import { test } from '@japa/runner'
import { waitFor } from '#tests/helpers/processes'
import { agentProcessIds } from '#tests/helpers/agent_processes'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

test.group('Stopping the service (process driver)', (group) => {
  let service: ServiceUnderFault
  group.setup(async () => {
    service = await startServiceUnderFault()
    return () => service.destroy()
  })

  test('SIGTERM stops the agent processes it started; none is left behind', async ({ assert }) => {
    const token = await service.signUp()
    const agentId = await service.createFixtureAgent(token, 'Shutdown agent')
    await waitFor(async () => (agentProcessIds(agentId).length > 0 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the agent process to run',
    })

    const exited = new Promise((resolve) => service.server.child.once('exit', resolve))
    service.server.child.kill('SIGTERM')
    await exited
    assert.deepEqual(agentProcessIds(agentId), [], 'no agent process outlives the service')
  }).timeout(120_000)
})
