import { test } from '@japa/runner'
import { noDockerEngine } from '#tests/helpers/docker_engine'
import { startModelUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'
import { waitFor } from '#tests/helpers/processes'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

/**
 * The whole service started with AGENT_RUNTIME=docker (images built here):
 * a hermes agent created through the API runs the real Hermes gateway in a
 * container and answers `/api/v1/agents/:id/chat` through the service's own
 * metered model proxy.
 */
test.group('Agents: a hermes agent on the docker driver, through the API', (group) => {
  let upstream: ModelUpstream
  let service: ServiceUnderFault | undefined
  group.teardown(async () => {
    await service?.destroy()
    await upstream?.close()
  })

  test(
    'create -> running in a container -> chat through the model proxy -> credits charged -> delete'
  )
    .skip(noDockerEngine, 'no Docker engine')
    .timeout(600_000)
    .run(async ({ assert }) => {
      upstream = await startModelUpstream({ reply: 'Hermes in Docker, through the API.' })
      service = await startServiceUnderFault({
        MODEL_API_URL: upstream.baseUrl,
        MODEL_API_KEY: 'sk-docker-api',
        MODEL_NAME: 'docker-api-model',
        AGENT_RUNTIME: 'docker',
        AGENT_IMAGES: 'local',
      })
      const token = await service.signUp()
      const created = await service.call('/agents', {
        method: 'POST',
        token,
        json: { name: 'Dock', framework: 'hermes', config: { personality: 'You are Dock.' } },
      })
      assert.equal(created.status, 201, JSON.stringify(created.body))
      const agentId: string = created.body.data.id
      await service.waitUntilRunning(token, agentId, 400_000)
      await waitFor(
        async () => {
          const status = await service!.call(`/agents/${agentId}/status`, { token })
          return status.body.data?.container === 'running' ? true : undefined
        },
        { timeoutMs: 60_000, what: 'the container to serve' }
      )

      const balance = async () => {
        const answer = await service!.call('/ai-credits/balance', { token })
        return answer.body.data.balance as number
      }
      const before = await balance()
      const key = await service.call('/auth/api-keys', {
        method: 'POST',
        token,
        json: { label: 'docker' },
      })
      const chat = await service.call(`/api/v1/agents/${agentId}/chat`, {
        method: 'POST',
        token: key.body.data.key,
        json: { message: 'Hello Dock' },
        // A real framework's first turn in a fresh container (not a figure under test).
        timeoutMs: 120_000,
      })
      assert.equal(chat.status, 200, JSON.stringify(chat.body))
      assert.equal(chat.body.data.content, 'Hermes in Docker, through the API.')
      assert.notEqual(chat.body.data.model, 'local-dev', 'answered by the container')
      const call = upstream.requests.find((r) => r.path.endsWith('/chat/completions'))
      assert.exists(call)
      assert.equal(call!.headers.authorization, 'Bearer sk-docker-api')
      assert.include(JSON.stringify(call!.body.messages), 'You are Dock.')
      assert.isBelow(await balance(), before, 'the model calls were charged')

      const removed = await service.call(`/agents/${agentId}`, { method: 'DELETE', token })
      assert.equal(removed.status, 200)
    })
})
