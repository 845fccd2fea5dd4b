import { test } from '@japa/runner'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import Quote from '#billing/models/quote'
import { clearPriceCache } from '#billing/services/price_feed'
import { createQuote, findQuoteByMemo, QUOTE_TTL_MINUTES } from '#billing/services/quote_service'
import { setPaymentEnv } from '#tests/helpers/solana/payment_env'
import {
  newAccountId,
  startPaymentWorld,
  type PaymentWorld,
} from '#tests/helpers/solana/payment_world'

test.group('Payment quotes', (group) => {
  let world: PaymentWorld
  group.setup(async () => {
    world = await startPaymentWorld()
    return () => world.close()
  })
  group.each.setup(async () => {
    world.prices.failWithStatus = null
    await clearPriceCache()
  })

  test('a SOL quote: exact amount from the feed price, unguessable memo, 15 minutes, kept for the account', async ({
    assert,
  }) => {
    const userId = await newAccountId()
    const before = Date.now()
    const quote = await createQuote({
      userId,
      purchase: { kind: 'tier', key: 'pro', billingPeriod: 'monthly' },
      token: 'sol',
    })
    assert.equal(quote.token, 'sol')
    assert.equal(quote.amountBaseUnits, '133266667')
    assert.equal(quote.amount, '0.133266667')
    assert.equal(quote.decimals, 9)
    assert.isNull(quote.mint)
    assert.equal(quote.recipient, world.treasury)
    assert.equal(quote.usdValue, 19.99)
    assert.equal(quote.tokenUsdPrice, 150)
    assert.match(quote.memo, /^agent-host:[\w-]{24}$/)
    const ttl = Date.parse(quote.expiresAt) - before
    assert.isAtLeast(ttl, QUOTE_TTL_MINUTES * 60_000 - 1000)
    assert.isAtMost(ttl, QUOTE_TTL_MINUTES * 60_000 + 5000)

    const stored = await findQuoteByMemo(quote.memo)
    assert.equal(stored?.id, quote.quoteId)
    assert.equal(stored?.userId, userId)
    assert.equal(stored?.amountBaseUnits, '133266667')
    assert.isNull(stored?.usedAt)
  })

  test('annual is 10 monthly prices; founding member is one 99 USD price', async ({ assert }) => {
    const userId = await newAccountId()
    const annual = await createQuote({
      userId,
      purchase: { kind: 'tier', key: 'pro', billingPeriod: 'annual' },
      token: 'sol',
    })
    assert.equal(annual.usdValue, 199.9)
    assert.equal(annual.amountBaseUnits, '1332666667')
    const founding = await createQuote({
      userId,
      purchase: { kind: 'tier', key: 'founding_member', billingPeriod: 'annual' },
      token: 'sol',
    })
    assert.equal(founding.usdValue, 99)
    assert.equal(founding.amount, '0.66')
  })

  test('USDC quotes are 1:1 with the mint decimals and need no price feed', async ({ assert }) => {
    world.prices.failWithStatus = 500
    const asked = world.prices.requests.length
    const quote = await createQuote({
      userId: await newAccountId(),
      purchase: { kind: 'addon', key: 'addon.agents.3', billingPeriod: 'monthly' },
      token: 'usdc',
    })
    assert.equal(quote.amountBaseUnits, '6990000')
    assert.equal(quote.amount, '6.99')
    assert.equal(quote.decimals, 6)
    assert.equal(quote.mint, world.usdc.address)
    assert.equal(world.prices.requests.length, asked, 'the price feed was not asked')
  })

  test('platform-token quotes use its price id and mint decimals', async ({ assert }) => {
    const quote = await createQuote({
      userId: await newAccountId(),
      purchase: { kind: 'addon', key: 'addon.ai_credits.25000', billingPeriod: 'monthly' },
      token: 'platform',
    })
    assert.equal(quote.amount, '1500')
    assert.equal(quote.amountBaseUnits, '1500000000000')
    assert.equal(quote.mint, world.platform.address)
    assert.equal(world.prices.requests.at(-1)?.searchParams.get('ids'), 'agent-host-token')
  })

  test('memos are unique', async ({ assert }) => {
    const userId = await newAccountId()
    const purchase = { kind: 'tier', key: 'starter', billingPeriod: 'monthly' } as const
    const quotes = await Promise.all(
      Array.from({ length: 5 }, () => createQuote({ userId, purchase, token: 'usdc' }))
    )
    assert.equal(new Set(quotes.map((quote) => quote.memo)).size, 5)
    assert.lengthOf(await Quote.query().where('user_id', userId), 5)
  })

  test('no price: 503; missing settings are named', async ({ assert }) => {
    const userId = await newAccountId()
    const purchase = { kind: 'tier', key: 'starter', billingPeriod: 'monthly' } as const
    world.prices.failWithStatus = 503
    await assert.rejects(
      () => createQuote({ userId, purchase, token: 'sol' }),
      /USD price of SOL is unavailable/
    )
    world.prices.failWithStatus = null

    for (const name of ['PRICE_API_URL', 'TREASURY_ADDRESS'] as const) {
      const restore = setPaymentEnv({ [name]: '' })
      try {
        await createQuote({ userId, purchase, token: 'sol' })
        assert.fail(`expected a refusal naming ${name}`)
      } catch (error) {
        assert.instanceOf(error, ServiceUnavailableException)
        assert.include((error as Error).message, name)
      } finally {
        restore()
      }
    }
    await assert.rejects(
      () =>
        createQuote({
          userId,
          purchase: { kind: 'tier', key: 'free', billingPeriod: 'monthly' },
          token: 'sol',
        }),
      /cannot be bought/
    )
  })
})
