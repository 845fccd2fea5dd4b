import { test } from '@japa/runner'
import { waitFor } from '#tests/helpers/processes'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'
import { startThrowawayRedis, type ThrowawayRedis } from '#tests/helpers/throwaway_redis'
import { TEST_PASSWORD } from '#tests/helpers/identity'

/**
 * Redis (REDIS_URL) goes away under a running service: nothing hangs,
 * sign-in and the API keep answering, rate limits keep applying (they
 * count in PostgreSQL meanwhile), and counting returns to Redis by itself
 * once it is back, without a restart.
 */
test.group('Fault: Redis goes away while the service serves', (group) => {
  let redis: ThrowawayRedis
  let service: ServiceUnderFault

  group.setup(async () => {
    redis = await startThrowawayRedis()
    service = await startServiceUnderFault({ REDIS_URL: redis.url })
    return async () => {
      await service.destroy()
      await redis.destroy()
    }
  })

  test('limits fail over to PostgreSQL during the outage and back to Redis after it', async ({
    assert,
  }) => {
    const { token, email } = await service.signUpAccount()
    const apiKey = await service.call('/auth/api-keys', {
      method: 'POST',
      token,
      json: { label: 'redis outage' },
    })
    const key = apiKey.body.data.key as string
    const listed = await service.call('/api/v1/agents', { token: key })
    assert.equal(listed.status, 200)
    assert.isNotEmpty(await redis.keys('rl*'), 'the daily quota counts in Redis while it is up')

    await redis.stop()
    const outageStarted = Date.now()
    const timed = async (path: string, init: Parameters<ServiceUnderFault['call']>[1] = {}) => {
      const started = Date.now()
      const answer = await service.call(path, init)
      return { ...answer, ms: Date.now() - started }
    }
    const during = [
      await timed('/api/v1/agents', { token: key }),
      await timed('/auth/login', { method: 'POST', json: { email, password: TEST_PASSWORD } }),
    ]
    assert.deepEqual(
      during.map((answer) => answer.status),
      [200, 200],
      JSON.stringify(during.map((answer) => answer.body))
    )

    // Ten failed sign-ins for one address and client are still limited: the count went on in PostgreSQL.
    const wrong = { email, password: 'not-the-password-1' }
    const failures: number[] = []
    for (let attempt = 0; attempt < 11; attempt++) {
      const answer = await timed('/auth/login', { method: 'POST', json: wrong })
      failures.push(answer.status)
    }
    assert.deepEqual(failures, [...Array.from({ length: 10 }, () => 401), 429])
    console.log(
      `    Redis down: answers in ${during.map((answer) => answer.ms).join(' / ')} ms; ` +
        `outage lasted ${Date.now() - outageStarted} ms with no failed request`
    )

    await redis.start()
    const back = Date.now()
    const msToRedis = await waitFor(
      async () => {
        await service.call('/api/v1/agents', { token: key })
        const keys = await redis.keys('rl*')
        return keys.length > 0 ? Date.now() - back : undefined
      },
      { timeoutMs: 15_000, intervalMs: 100, what: 'counting to return to Redis' }
    )
    console.log(`    Redis back: the service counts in it again after ${msToRedis} ms`)
    assert.isBelow(msToRedis, 15_000)
  }).timeout(120_000)
})
