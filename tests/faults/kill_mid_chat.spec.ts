import { test } from '@japa/runner'
import { startModelUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'
import { waitFor } from '#tests/helpers/processes'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

/**
 * kill -9 of the service while a hosted chat holds credits and waits for
 * the model: after a restart the held credits come back (nothing charged,
 * nothing lost) within seconds, not after the hold's one-hour expiry.
 */
test.group('Fault: the service is killed (-9) in the middle of a chat', (group) => {
  let upstream: ModelUpstream
  let service: ServiceUnderFault

  group.setup(async () => {
    upstream = await startModelUpstream()
    service = await startServiceUnderFault({
      MODEL_API_URL: upstream.baseUrl,
      MODEL_API_KEY: 'sk-fault-test',
      MODEL_NAME: 'fault-model',
    })
    return async () => {
      await service.destroy()
      await upstream.close()
    }
  })

  test('held credits come back after a restart and nothing is charged', async ({ assert }) => {
    const token = await service.signUp()
    const balanceOf = async () => {
      const answer = await service.call('/ai-credits/balance', { token })
      return answer.body.data.balance as number
    }
    const usageCount = async () => {
      const history = await service.call('/ai-credits/history', { token })
      return (history.body.data.usage as unknown[]).length
    }
    assert.isAbove(await balanceOf(), 0, 'a verified account starts with its monthly grant')

    const agentId = await service.createFixtureAgent(token, 'Fault agent')
    // A stopped agent answers on the hosted path: the service itself holds credits.
    const stopped = await service.call(`/agents/${agentId}/stop`, { method: 'POST', token })
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body))

    const apiKey = await service.call('/auth/api-keys', {
      method: 'POST',
      token,
      json: { label: 'fault' },
    })
    const chatOnce = (timeoutMs: number) =>
      service.call(`/api/v1/agents/${agentId}/chat`, {
        method: 'POST',
        token: apiKey.body.data.key,
        json: { message: 'Hello?' },
        timeoutMs,
      })
    // One answered chat first: the child server loads the chat path's modules on first
    // use, which on a busy CI machine took longer than the wait below.
    const warmUp = await chatOnce(60_000)
    assert.equal(warmUp.status, 200, JSON.stringify(warmUp.body))
    const before = await balanceOf()
    const usageBefore = await usageCount()

    upstream.set({ replyDelayMs: 120_000 })
    const chat = chatOnce(150_000).catch((error: Error) => error)
    await waitFor(async () => (upstream.inFlight > 0 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the chat to reach the model',
    }).catch(async (error) => {
      throw new Error(
        `${error.message}; the chat answered ${JSON.stringify(await chat)}; ` +
          `the service said:\n${service.server.output().slice(-3000)}`
      )
    })
    assert.isBelow(await balanceOf(), before, 'credits are held while the model works')

    await service.kill9()
    assert.instanceOf(await chat, Error, 'the client sees the connection end, not a hang')
    const killedAt = Date.now()
    await service.restart()
    let last: number | undefined
    const balance = await waitFor(
      async () => {
        last = await balanceOf()
        return last === before ? last : undefined
      },
      { timeoutMs: 30_000, what: 'the held credits to come back' }
    ).catch((error: Error) => {
      throw new Error(
        `${error.message}: balance ${last}, ${before} before the chat; ` +
          `the restarted service said:\n${service.server.output().slice(-3000)}`
      )
    })
    console.log(
      `    kill -9 mid-chat: credits back ${Date.now() - killedAt} ms after the kill (restart included)`
    )
    assert.equal(balance, before)

    assert.equal(await usageCount(), usageBefore, 'nothing was charged')
  }).timeout(180_000)
})
