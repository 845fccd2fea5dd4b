import { test } from '@japa/runner'
import { waitFor } from '#tests/helpers/processes'
import { agentProcessIds } from '#tests/helpers/agent_processes'
import { startModelUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

test.group('Stopping the service (process driver)', (group) => {
  let service: ServiceUnderFault
  let upstream: ModelUpstream
  group.setup(async () => {
    upstream = await startModelUpstream()
    service = await startServiceUnderFault({
      MODEL_API_URL: upstream.baseUrl,
      MODEL_API_KEY: 'sk-shutdown-test',
      MODEL_NAME: 'shutdown-model',
    })
    return async () => {
      // Stopped right after its restart, while it recovers its agent: nothing may be left running.
      await service.destroy()
      await upstream.close()
    }
  })

  test('SIGTERM stops the agent processes it started; none is left behind', async ({ assert }) => {
    const token = await service.signUp()
    const agentId = await service.createFixtureAgent(token, 'Shutdown agent')
    await waitFor(async () => (agentProcessIds(agentId).length > 0 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the agent process to run',
    })

    const exited = new Promise((resolve) => service.server.child.once('exit', resolve))
    const stopping = Date.now()
    service.server.child.kill('SIGTERM')
    await exited
    console.log(`    SIGTERM with one agent: exited after ${Date.now() - stopping} ms`)
    assert.deepEqual(agentProcessIds(agentId), [], 'no agent process outlives the service')
    await service.restart()
  }).timeout(120_000)

  test('SIGTERM with an open chat stream and WebSocket: sockets told 1001, the service exits', async ({
    assert,
  }) => {
    const token = await service.signUp()
    const agentId = await service.createFixtureAgent(token, 'Busy agent')
    await service.call(`/agents/${agentId}/stop`, { method: 'POST', token })
    upstream.set({ reply: 'a b c d e f g h i j', tokenDelayMs: 5_000 })

    const sse = await service.openChatStream(token, agentId, 'Take your time')
    assert.equal(sse.status, 200)
    const { closed: wsClosed } = await service.openChatSocket(token, agentId)

    const started = Date.now()
    const exited = new Promise((resolve) => service.server.child.once('exit', resolve))
    service.server.child.kill('SIGTERM')
    const outcome = await Promise.race([
      exited.then(() => 'exited'),
      new Promise((resolve) => setTimeout(() => resolve('still running'), 30_000)),
    ])
    console.log(`    SIGTERM with open streams: exited after ${Date.now() - started} ms`)
    assert.equal(outcome, 'exited', 'open connections do not keep a stopping service alive')
    assert.equal(await wsClosed, 1001)
    await sse.body?.cancel().catch(() => {})
    await service.restart()
  }).timeout(120_000)
})
