import { Socket } from 'node:net'
import { test } from '@japa/runner'
import { RedisConnection } from '@adonisjs/redis'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import { clearPriceCache, PRICE_CACHE_SECONDS, usdPrice } from '#billing/services/price_feed'
import { setPaymentEnv } from '#tests/helpers/solana/payment_env'
import { startPriceFeed, type PriceFeedServer } from '#tests/helpers/solana/price_feed_server'

const REDIS_URL = 'redis://127.0.0.1:6379/0'

function redisReachable(): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket()
    const done = (reachable: boolean) => {
      socket.destroy()
      resolve(reachable)
    }
    socket.setTimeout(500)
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
    socket.once('timeout', () => done(false))
    socket.connect(6379, '127.0.0.1')
  })
}

const hasRedis = await redisReachable()

test.group('Price feed', (group) => {
  let feed: PriceFeedServer
  let restore: () => void

  group.setup(async () => {
    feed = await startPriceFeed({ 'solana': 142.1, 'my-token': 0.0125 })
    restore = setPaymentEnv({
      PRICE_API_URL: feed.url,
      PLATFORM_TOKEN_PRICE_ID: 'my-token',
      REDIS_URL: '',
    })
    return async () => {
      restore()
      await clearPriceCache()
      await feed.close()
    }
  })
  group.each.setup(async () => {
    feed.failWithStatus = null
    feed.requests.length = 0
    await clearPriceCache()
  })

  test('asks the simple-price endpoint and caches the answer for 60 s', async ({ assert }) => {
    assert.equal(await usdPrice('sol'), 142.1)
    assert.lengthOf(feed.requests, 1)
    assert.equal(feed.requests[0].searchParams.get('ids'), 'solana')
    assert.equal(feed.requests[0].searchParams.get('vs_currencies'), 'usd')

    feed.prices.solana = 150
    assert.equal(await usdPrice('sol'), 142.1, 'served from the cache')
    assert.lengthOf(feed.requests, 1)

    const realNow = Date.now
    Date.now = () => realNow() + (PRICE_CACHE_SECONDS + 1) * 1000
    try {
      assert.equal(await usdPrice('sol'), 150, 'refreshed after 60 s')
    } finally {
      Date.now = realNow
    }
    assert.lengthOf(feed.requests, 2)
    feed.prices.solana = 142.1
  })

  test('concurrent lookups share one request; USDC is 1:1 without asking', async ({ assert }) => {
    const prices = await Promise.all([usdPrice('sol'), usdPrice('sol'), usdPrice('sol')])
    assert.deepEqual(prices, [142.1, 142.1, 142.1])
    assert.lengthOf(feed.requests, 1)
    assert.equal(await usdPrice('usdc'), 1)
    assert.lengthOf(feed.requests, 1)
  })

  test('the platform token is looked up by PLATFORM_TOKEN_PRICE_ID', async ({ assert }) => {
    assert.equal(await usdPrice('platform'), 0.0125)
    assert.equal(feed.requests[0].searchParams.get('ids'), 'my-token')
  })

  test('no usable price: 503 with a clear message', async ({ assert }) => {
    for (const status of [500, 429]) {
      feed.failWithStatus = status
      await assert.rejects(() => usdPrice('sol'), new RegExp(`HTTP ${status}`))
    }
    feed.failWithStatus = null
    for (const bad of [0, -1, Number.NaN]) {
      feed.prices['my-token'] = bad
      try {
        await usdPrice('platform')
        assert.fail('expected 503')
      } catch (error) {
        assert.instanceOf(error, ServiceUnavailableException)
        assert.include((error as Error).message, 'no USD price for "my-token"')
      }
    }
    feed.prices['my-token'] = 0.0125
    // Failures are not cached.
    assert.equal(await usdPrice('platform'), 0.0125)

    const restoreUrl = setPaymentEnv({ PRICE_API_URL: 'http://127.0.0.1:9/simple/price' })
    try {
      await assert.rejects(() => usdPrice('sol'), /could not be reached/)
    } finally {
      restoreUrl()
    }
  })

  test('missing settings are named', async ({ assert }) => {
    for (const [name, token] of [
      ['PRICE_API_URL', 'sol'],
      ['PLATFORM_TOKEN_PRICE_ID', 'platform'],
    ] as const) {
      const restoreSetting = setPaymentEnv({ [name]: '' })
      try {
        await usdPrice(token)
        assert.fail('expected 503')
      } catch (error) {
        assert.instanceOf(error, ServiceUnavailableException)
        assert.include((error as Error).message, name)
      } finally {
        restoreSetting()
      }
    }
  })

  test('with REDIS_URL the price is shared through Redis for at most 60 s', async ({ assert }) => {
    const restoreRedis = setPaymentEnv({ REDIS_URL })
    const probe = new RedisConnection('price-feed-test', { host: '127.0.0.1', port: 6379 })
    try {
      await clearPriceCache()
      assert.equal(await usdPrice('sol'), 142.1)
      assert.equal(await probe.get('billing:usd-price:solana'), '142.1')
      const ttl = await probe.ttl('billing:usd-price:solana')
      assert.isAbove(ttl, 0)
      assert.isAtMost(ttl, PRICE_CACHE_SECONDS)

      // Another instance's fresh price in Redis is used without asking the feed.
      await probe.set('billing:usd-price:solana', '99.5', 'EX', 30)
      const realNow = Date.now
      Date.now = () => realNow() + (PRICE_CACHE_SECONDS + 1) * 1000 // local copy stale
      try {
        assert.equal(await usdPrice('sol'), 99.5)
      } finally {
        Date.now = realNow
      }
      assert.lengthOf(feed.requests, 1)
    } finally {
      await clearPriceCache()
      await probe.quit()
      restoreRedis()
    }
  }).skip(!hasRedis, 'no Redis server at 127.0.0.1:6379')
})
