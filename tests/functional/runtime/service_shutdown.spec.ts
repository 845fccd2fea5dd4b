import { readdirSync, readFileSync } from 'node:fs'
import { test } from '@japa/runner'
import { waitFor } from '#tests/helpers/processes'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

/** Pids whose environment carries the runtime's marker for this agent. */
function agentPids(agentId: string): number[] {
  const marker = `AGENT_HOST_AGENT_ID=${agentId}`
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0').includes(marker)) {
        pids.push(Number(entry))
      }
    } catch {}
  }
  return pids
}

test.group('Stopping the service (process driver)', (group) => {
  let service: ServiceUnderFault
  group.setup(async () => {
    service = await startServiceUnderFault()
    return () => service.destroy()
  })

  test('SIGTERM stops the agent processes it started; none is left behind', async ({ assert }) => {
    const token = await service.signUp()
    const created = await service.call('/agents', {
      method: 'POST',
      token,
      json: { name: 'Shutdown agent', framework: 'fixture' },
    })
    assert.equal(created.status, 201, JSON.stringify(created.body))
    const agentId = created.body.data.id as string
    await waitFor(async () => (agentPids(agentId).length > 0 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the agent process to run',
    })

    const exited = new Promise((resolve) => service.server.child.once('exit', resolve))
    service.server.child.kill('SIGTERM')
    await exited
    assert.deepEqual(agentPids(agentId), [], 'no agent process outlives the service')
  }).timeout(120_000)
})
