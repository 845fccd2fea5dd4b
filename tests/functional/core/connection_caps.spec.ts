import { test } from '@japa/runner'
import { startServerProcess, waitFor, type ServerProcess } from '#tests/helpers/processes'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'
import { startThrowawayRedis, type ThrowawayRedis } from '#tests/helpers/throwaway_redis'

/**
 * Two instances of the service on one PostgreSQL and one Redis: an
 * account's cap on open live log streams (5) counts across both, and a
 * slot freed on one is usable on the other.
 */
test.group('Connection caps across instances (REDIS_URL)', (group) => {
  let redis: ThrowawayRedis
  let first: ServiceUnderFault
  let second: ServerProcess

  group.setup(async () => {
    redis = await startThrowawayRedis()
    first = await startServiceUnderFault({ REDIS_URL: redis.url })
    second = await startServerProcess({
      DATABASE_URL: first.postgres.url,
      STORAGE_DIR: first.storage,
      REDIS_URL: redis.url,
      LOG_LEVEL: 'warn',
    })
    await waitFor(
      async () => {
        const answer = await fetch(`${second.url}/health`)
        return answer.status === 200 ? true : undefined
      },
      { timeoutMs: 90_000, what: 'the second instance to serve' }
    )
    return async () => {
      await second.stop()
      await first.destroy()
      await redis.destroy()
    }
  })

  test('five live log streams over two instances; the sixth is refused on either', async ({
    assert,
  }) => {
    const token = await first.signUp()
    const agentId = await first.createFixtureAgent(token, 'Logged agent')
    await first.waitUntilRunning(token, agentId)
    const open = (base: string, controller: AbortController) =>
      fetch(`${base}/agents/${agentId}/logs?stream=true&tail=0`, {
        headers: { authorization: `Bearer ${token}` },
        signal: controller.signal,
      })
    const controllers = Array.from({ length: 5 }, () => new AbortController())
    const streams = await Promise.all(
      controllers.map((controller, index) =>
        open(index < 3 ? first.server.url : second.url, controller)
      )
    )
    assert.deepEqual(
      streams.map((stream) => stream.status),
      [200, 200, 200, 200, 200]
    )

    for (const base of [first.server.url, second.url]) {
      const extra = await open(base, new AbortController())
      assert.equal(extra.status, 429, `refused on ${base}`)
      const body = (await extra.json()) as { code: string }
      assert.equal(body.code, 'RATE_LIMIT_EXCEEDED')
    }

    // A stream closed on the first instance frees a slot the second can use.
    controllers[0].abort()
    const freed = new AbortController()
    const reopened = await waitFor(
      async () => {
        const answer = await open(second.url, freed)
        if (answer.status === 200) return true
        await answer.body?.cancel()
        return undefined
      },
      { timeoutMs: 10_000, what: 'the freed slot to be usable on the other instance' }
    )
    assert.isTrue(reopened)
    freed.abort()
    for (const controller of controllers) controller.abort()
  }).timeout(180_000)
})
