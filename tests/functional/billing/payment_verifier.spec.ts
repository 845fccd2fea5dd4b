import { setTimeout as sleep } from 'node:timers/promises'
import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import type { Assert } from '@japa/assert'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import Payment from '#billing/models/payment'
import { clearPriceCache } from '#billing/services/price_feed'
import { PaymentRejectedException, type PaymentCheck } from '#billing/services/payment_rejected'
import { verifyPayment, type VerifyPaymentInput } from '#billing/services/payment_verifier'
import { rpcLimits } from '#billing/services/solana_rpc'
import { recordVerifiedPayment } from '#billing/services/payment_recorder'
import { createQuote } from '#billing/services/quote_service'
import type { Purchase } from '#billing/services/pricing'
import { setPaymentEnv } from '#tests/helpers/solana/payment_env'
import {
  newAccountId,
  startPaymentWorld,
  type PaymentWorld,
} from '#tests/helpers/solana/payment_world'
import { TOKEN_2022_PROGRAM_ADDRESS } from '#tests/helpers/solana/local_chain'

const starter: Purchase = { kind: 'tier', key: 'starter', billingPeriod: 'monthly' }
const pro: Purchase = { kind: 'tier', key: 'pro', billingPeriod: 'monthly' }
/** starter monthly (6.99 USD) at 150 USD/SOL, rounded up. */
const STARTER_LAMPORTS = 46_600_000n
const STARTER_USDC = 6_990_000n

async function rejection(assert: Assert, promise: Promise<unknown>, check: PaymentCheck) {
  try {
    await promise
  } catch (error) {
    assert.instanceOf(error, PaymentRejectedException, String(error))
    const rejected = error as PaymentRejectedException
    assert.equal(rejected.check, check, rejected.message)
    assert.equal(rejected.status, 400)
    assert.equal(rejected.apiCode, 'VALIDATION_ERROR')
    return rejected.message
  }
  assert.fail(`expected the payment to be rejected by the ${check} check`)
  return ''
}

async function unavailable(assert: Assert, promise: Promise<unknown>) {
  try {
    await promise
  } catch (error) {
    assert.instanceOf(error, ServiceUnavailableException, String(error))
    assert.equal((error as ServiceUnavailableException).status, 503)
    return (error as Error).message
  }
  assert.fail('expected 503')
  return ''
}

test.group('Payment verification (local Solana RPC, real signed transactions)', (group) => {
  let world: PaymentWorld
  /** The account verifyPayment is asked for unless a test names another. */
  let accountId: string
  group.setup(async () => {
    accountId = await newAccountId()
    world = await startPaymentWorld()
    return () => world.close()
  })
  group.each.setup(async () => {
    world.prices.failWithStatus = null
    world.rpc.failWithStatus = null
    world.rpc.hang = false
    await clearPriceCache()
  })

  async function solPayment(
    lamports: bigint,
    options: { memo?: string; version?: 0 | 'legacy' } = {}
  ) {
    const wallet = await world.chain.wallet(2)
    const tx = await world.chain.transferSol({
      from: wallet,
      to: world.treasury,
      lamports,
      ...options,
    })
    return { wallet, tx }
  }

  function input(signature: string, extra: Partial<VerifyPaymentInput> = {}): VerifyPaymentInput {
    return {
      signature,
      userId: accountId,
      linkedWallet: null,
      token: 'sol',
      purchase: starter,
      ...extra,
    }
  }

  test('accepts a finalized SOL payment signed by the linked wallet', async ({ assert }) => {
    const { wallet, tx } = await solPayment(STARTER_LAMPORTS)
    const verified = await verifyPayment(input(tx.signature, { linkedWallet: wallet.address }))
    assert.equal(verified.signature, tx.signature)
    assert.equal(verified.token, 'sol')
    assert.isNull(verified.mint)
    assert.equal(verified.decimals, 9)
    assert.equal(verified.amountBaseUnits, STARTER_LAMPORTS.toString())
    assert.equal(verified.usdValue, 6.99)
    assert.equal(verified.payer, wallet.address)
    assert.equal(verified.via, 'wallet')
    assert.isNull(verified.quoteId)
    assert.equal(verified.blockTime.getTime(), tx.blockTime! * 1000)

    // The real kit client asked for a finalized transaction, v0 included (kit leaves out
    // `commitment: 'finalized'` because it is what a node applies by default).
    const call = world.rpc.callsOf('getTransaction').at(-1)!
    const options = call.params[1] as Record<string, unknown>
    assert.equal(call.params[0], tx.signature)
    assert.equal(options.commitment ?? 'finalized', 'finalized')
    assert.equal(options.maxSupportedTransactionVersion, 0)
  })

  test('accepts a legacy transaction and a SOL amount within the 2% tolerance', async ({
    assert,
  }) => {
    const { wallet, tx } = await solPayment((STARTER_LAMPORTS * 985n) / 1000n, {
      version: 'legacy',
    })
    const verified = await verifyPayment(input(tx.signature, { linkedWallet: wallet.address }))
    assert.equal(verified.amountBaseUnits, ((STARTER_LAMPORTS * 985n) / 1000n).toString())
  })

  test('accepts USDC paid into the treasury token account created in the same transaction', async ({
    assert,
  }) => {
    const wallet = await world.chain.wallet(1)
    await world.chain.mintTo(world.usdc, wallet.address, 50_000_000n)
    const tx = await world.chain.transferToken({
      mint: world.usdc,
      from: wallet,
      toOwner: world.treasury,
      amount: STARTER_USDC,
    })
    const treasuryAccount = await world.chain.associatedTokenAddress(world.treasury, world.usdc)
    const index = tx.accountKeys.indexOf(treasuryAccount)
    assert.isAbove(index, -1)
    assert.isFalse(tx.preTokenBalances.has(index), 'the account did not exist before')
    assert.equal(tx.postTokenBalances.get(index)?.amount, STARTER_USDC)

    const verified = await verifyPayment(
      input(tx.signature, { linkedWallet: wallet.address, token: 'usdc' })
    )
    assert.equal(verified.mint, world.usdc.address)
    assert.equal(verified.decimals, 6)
    assert.equal(verified.amountBaseUnits, STARTER_USDC.toString())
    assert.equal(verified.expectedBaseUnits, STARTER_USDC.toString())
  })

  test('accepts the platform token at the feed price and counts only the change', async ({
    assert,
  }) => {
    const wallet = await world.chain.wallet(1)
    await world.chain.mintTo(world.platform, wallet.address, 10n ** 15n)
    // The treasury already holds some: only what this transaction added counts.
    await world.chain.transferToken({
      mint: world.platform,
      from: wallet,
      toOwner: world.treasury,
      amount: 1_000_000_000n,
    })
    const due = 349_500_000_000n // 6.99 USD at 0.02 USD, 9 decimals
    const tx = await world.chain.transferToken({
      mint: world.platform,
      from: wallet,
      toOwner: world.treasury,
      amount: due,
    })
    const verified = await verifyPayment(
      input(tx.signature, { linkedWallet: wallet.address, token: 'platform' })
    )
    assert.equal(verified.amountBaseUnits, due.toString())
  })

  test('Token-2022 with a transfer fee: what arrived counts, not what was sent', async ({
    assert,
  }) => {
    // A platform token on Token-2022 withholding 1% of every transfer.
    const mint = await world.chain.createMint(9, TOKEN_2022_PROGRAM_ADDRESS, {
      transferFee: { basisPoints: 100, maxFee: 10n ** 15n },
    })
    const restore = setPaymentEnv({ PLATFORM_TOKEN_MINT: mint.address })
    try {
      const wallet = await world.chain.wallet(1)
      await world.chain.mintTo(mint, wallet.address, 10n ** 15n)
      const due = 349_500_000_000n // 6.99 USD at 0.02 USD
      // Sending the price less 1.5% passes the 2% tolerance, but only 98.5% - 1% arrives.
      const short = await world.chain.transferToken({
        mint,
        from: wallet,
        toOwner: world.treasury,
        amount: (due * 985n) / 1000n,
      })
      const treasuryAccount = await world.chain.associatedTokenAddress(world.treasury, mint)
      const arrived = world.chain.tokenAccount(treasuryAccount)!.amount
      assert.equal(arrived, (due * 985n) / 1000n - (due * 985n) / 1000n / 100n)
      await rejection(
        assert,
        verifyPayment(input(short.signature, { linkedWallet: wallet.address, token: 'platform' })),
        'amount'
      )

      const grossedUp = await world.chain.transferToken({
        mint,
        from: wallet,
        toOwner: world.treasury,
        amount: (due * 100n) / 99n + 1n,
      })
      const verified = await verifyPayment(
        input(grossedUp.signature, { linkedWallet: wallet.address, token: 'platform' })
      )
      assert.isAtLeast(Number(verified.amountBaseUnits), Number(due))
      assert.isBelow(Number(verified.amountBaseUnits), Number((due * 100n) / 99n))
    } finally {
      restore()
    }
  })

  test('rejects a payment to another recipient', async ({ assert }) => {
    const wallet = await world.chain.wallet(2)
    const other = await world.chain.wallet(0)
    const sol = await world.chain.transferSol({
      from: wallet,
      to: other.address,
      lamports: STARTER_LAMPORTS,
    })
    const message = await rejection(
      assert,
      verifyPayment(input(sol.signature, { linkedWallet: wallet.address })),
      'recipient'
    )
    assert.include(message, 'treasury')

    await world.chain.mintTo(world.usdc, wallet.address, 50_000_000n)
    const usdc = await world.chain.transferToken({
      mint: world.usdc,
      from: wallet,
      toOwner: other.address,
      amount: STARTER_USDC,
    })
    await rejection(
      assert,
      verifyPayment(input(usdc.signature, { linkedWallet: wallet.address, token: 'usdc' })),
      'recipient'
    )
  })

  test('rejects a token other than the one named', async ({ assert }) => {
    const wallet = await world.chain.wallet(1)
    await world.chain.mintTo(world.platform, wallet.address, 10n ** 12n)
    const tx = await world.chain.transferToken({
      mint: world.platform,
      from: wallet,
      toOwner: world.treasury,
      amount: 10_000_000n,
    })
    const message = await rejection(
      assert,
      verifyPayment(input(tx.signature, { linkedWallet: wallet.address, token: 'usdc' })),
      'recipient'
    )
    assert.include(message, 'USDC')
  })

  test('rejects too little', async ({ assert }) => {
    const { wallet, tx } = await solPayment((STARTER_LAMPORTS * 97n) / 100n)
    const message = await rejection(
      assert,
      verifyPayment(input(tx.signature, { linkedWallet: wallet.address })),
      'amount'
    )
    assert.include(message, '0.045202 SOL')
    assert.include(message, '0.0466 SOL')

    const payer = await world.chain.wallet(1)
    await world.chain.mintTo(world.usdc, payer.address, 50_000_000n)
    const usdc = await world.chain.transferToken({
      mint: world.usdc,
      from: payer,
      toOwner: world.treasury,
      amount: STARTER_USDC - 1n,
    })
    await rejection(
      assert,
      verifyPayment(input(usdc.signature, { linkedWallet: payer.address, token: 'usdc' })),
      'amount'
    )
  })

  test('rejects a transaction that failed on chain', async ({ assert }) => {
    const wallet = await world.chain.wallet(2)
    const tx = await world.chain.transferSol({
      from: wallet,
      to: world.treasury,
      lamports: STARTER_LAMPORTS,
      fail: true,
    })
    assert.deepEqual(tx.err, { InstructionError: [1, { Custom: 1 }] })
    const message = await rejection(
      assert,
      verifyPayment(input(tx.signature, { linkedWallet: wallet.address })),
      'succeeded'
    )
    assert.include(message, 'failed')

    // Balances alone do not decide: a transaction the node reports as failed is refused.
    const { tx: paid } = await solPayment(STARTER_LAMPORTS)
    world.chain.setError(paid.signature, { InstructionError: [0, 'GenericError'] })
    await rejection(
      assert,
      verifyPayment(input(paid.signature, { linkedWallet: paid.accountKeys[0] })),
      'succeeded'
    )
  })

  test('rejects a transaction that is not finalized yet, accepts it once finalized', async ({
    assert,
  }) => {
    const { wallet, tx } = await solPayment(STARTER_LAMPORTS)
    world.chain.setCommitment(tx.signature, 'confirmed')
    const message = await rejection(
      assert,
      verifyPayment(input(tx.signature, { linkedWallet: wallet.address })),
      'finalized'
    )
    assert.include(message, 'confirmed')

    world.chain.setCommitment(tx.signature, 'finalized')
    const verified = await verifyPayment(input(tx.signature, { linkedWallet: wallet.address }))
    assert.equal(verified.signature, tx.signature)
  })

  test('rejects an unknown signature and a malformed one', async ({ assert }) => {
    const { wallet, tx } = await solPayment(STARTER_LAMPORTS)
    world.chain.forget(tx.signature)
    await rejection(
      assert,
      verifyPayment(input(tx.signature, { linkedWallet: wallet.address })),
      'not_found'
    )
    await rejection(assert, verifyPayment(input('not-a-signature')), 'signature')
  })

  test('rejects a transaction older than 30 minutes', async ({ assert }) => {
    const { wallet, tx } = await solPayment(STARTER_LAMPORTS)
    world.chain.setBlockTime(tx.signature, Math.floor(Date.now() / 1000) - 31 * 60)
    const message = await rejection(
      assert,
      verifyPayment(input(tx.signature, { linkedWallet: wallet.address })),
      'block_time'
    )
    assert.include(message, '30 minutes')

    world.chain.setBlockTime(tx.signature, Math.floor(Date.now() / 1000) - 29 * 60)
    await verifyPayment(input(tx.signature, { linkedWallet: wallet.address }))
  })

  test('rejects a payment not signed by the linked wallet', async ({ assert }) => {
    const { tx } = await solPayment(STARTER_LAMPORTS)
    const linked = await world.chain.wallet(0)
    const message = await rejection(
      assert,
      verifyPayment(input(tx.signature, { linkedWallet: linked.address })),
      'payer'
    )
    assert.include(message, 'linked')
    await rejection(assert, verifyPayment(input(tx.signature, { linkedWallet: null })), 'payer')
  })

  test('quote memo path: paid by anyone, carrying the account quote memo, checked against the quoted amount', async ({
    assert,
  }) => {
    const userId = await newAccountId()
    const quote = await createQuote({ userId, purchase: pro, token: 'sol' })
    assert.equal(quote.amountBaseUnits, '133266667') // 19.99 USD at 150 USD/SOL, rounded up

    // Signed by a wallet the account never linked, carrying the memo.
    const stranger = await world.chain.wallet(2)
    const tx = await world.chain.transferSol({
      from: stranger,
      to: world.treasury,
      lamports: BigInt(quote.amountBaseUnits),
      memo: quote.memo,
    })
    // The price moved since: the quote's amount still holds, without the feed.
    world.prices.failWithStatus = 503
    await clearPriceCache()
    const verified = await verifyPayment({
      signature: tx.signature,
      userId,
      linkedWallet: null,
      token: 'sol',
      purchase: pro,
    })
    assert.equal(verified.via, 'quote')
    assert.equal(verified.quoteId, quote.quoteId)
    assert.equal(verified.expectedBaseUnits, quote.amountBaseUnits)
    assert.equal(verified.payer, stranger.address)
    assert.equal(verified.usdValue, 19.99)

    // The same memo presented by another account is not theirs.
    await rejection(
      assert,
      verifyPayment({ ...input(tx.signature), purchase: pro, linkedWallet: stranger.address }),
      'payer'
    )
    // The quote names its purchase and token.
    await rejection(
      assert,
      verifyPayment({ signature: tx.signature, userId, token: 'sol', purchase: starter }),
      'quote'
    )
  })

  test('quote memo path: less than quoted, or after the quote window, is rejected', async ({
    assert,
  }) => {
    const userId = await newAccountId()
    const quote = await createQuote({ userId, purchase: pro, token: 'sol' })
    const stranger = await world.chain.wallet(2)
    // 99% would pass the live-price tolerance, but a quote is exact.
    const short = await world.chain.transferSol({
      from: stranger,
      to: world.treasury,
      lamports: (BigInt(quote.amountBaseUnits) * 99n) / 100n,
      memo: quote.memo,
    })
    const message = await rejection(
      assert,
      verifyPayment({ signature: short.signature, userId, token: 'sol', purchase: pro }),
      'amount'
    )
    assert.include(message, 'as quoted')

    const late = await world.chain.transferSol({
      from: stranger,
      to: world.treasury,
      lamports: BigInt(quote.amountBaseUnits),
      memo: quote.memo,
    })
    world.chain.setBlockTime(late.signature, Math.floor(Date.parse(quote.expiresAt) / 1000) + 300)
    await rejection(
      assert,
      verifyPayment({ signature: late.signature, userId, token: 'sol', purchase: pro }),
      'block_time'
    )
  })

  test('price feed down: 503 with a clear message, never a guess', async ({ assert }) => {
    const { wallet, tx } = await solPayment(STARTER_LAMPORTS)
    world.prices.failWithStatus = 500
    const message = await unavailable(
      assert,
      verifyPayment(input(tx.signature, { linkedWallet: wallet.address }))
    )
    assert.include(message, 'USD price of SOL is unavailable')

    // A feed that answers without the token's price is as good as down.
    world.prices.failWithStatus = null
    const saved = world.prices.prices.solana
    delete world.prices.prices.solana
    try {
      await unavailable(
        assert,
        verifyPayment(input(tx.signature, { linkedWallet: wallet.address }))
      )
    } finally {
      world.prices.prices.solana = saved
    }
  })

  test('Solana RPC down: 503', async ({ assert }) => {
    const { wallet, tx } = await solPayment(STARTER_LAMPORTS)
    world.rpc.failWithStatus = 502
    const message = await unavailable(
      assert,
      verifyPayment(input(tx.signature, { linkedWallet: wallet.address }))
    )
    assert.include(message, 'Solana RPC')
  })

  test('Solana RPC hangs: 503 once the bound passes, nothing recorded', async ({ assert }) => {
    const { wallet, tx } = await solPayment(STARTER_LAMPORTS)
    const bound = rpcLimits.timeoutMs
    rpcLimits.timeoutMs = 500
    world.rpc.hang = true
    try {
      const message = await unavailable(
        assert,
        verifyPayment(input(tx.signature, { linkedWallet: wallet.address }))
      )
      assert.include(message, 'Solana RPC')
      assert.isNull(await Payment.findBy('signature', tx.signature))
    } finally {
      rpcLimits.timeoutMs = bound
      world.rpc.hang = false
    }
  })

  test('a missing configuration variable is named in the error', async ({ assert }) => {
    const { wallet, tx } = await solPayment(STARTER_LAMPORTS)
    const cases: [Parameters<typeof setPaymentEnv>[0], VerifyPaymentInput['token']][] = [
      [{ SOLANA_RPC_URL: '' }, 'sol'],
      [{ TREASURY_ADDRESS: '' }, 'sol'],
      [{ PRICE_API_URL: '' }, 'sol'],
      [{ USDC_MINT: '' }, 'usdc'],
      [{ PLATFORM_TOKEN_MINT: '' }, 'platform'],
    ]
    for (const [unset, token] of cases) {
      const restore = setPaymentEnv(unset)
      try {
        const message = await unavailable(
          assert,
          verifyPayment(input(tx.signature, { linkedWallet: wallet.address, token }))
        )
        assert.include(message, Object.keys(unset)[0])
      } finally {
        restore()
      }
    }

    // The platform token needs its price id.
    await world.chain.mintTo(world.platform, wallet.address, 10n ** 15n)
    const platform = await world.chain.transferToken({
      mint: world.platform,
      from: wallet,
      toOwner: world.treasury,
      amount: 349_500_000_000n,
    })
    const restore = setPaymentEnv({ PLATFORM_TOKEN_PRICE_ID: '' })
    try {
      const message = await unavailable(
        assert,
        verifyPayment(
          input(platform.signature, { linkedWallet: wallet.address, token: 'platform' })
        )
      )
      assert.include(message, 'PLATFORM_TOKEN_PRICE_ID')
    } finally {
      restore()
    }
  })

  test('replay: a recorded signature is refused, by the same and by another account', async ({
    assert,
  }) => {
    const { wallet, tx } = await solPayment(STARTER_LAMPORTS)
    const request = input(tx.signature, { linkedWallet: wallet.address })
    const verified = await verifyPayment(request)
    const other = await verifyPayment({ ...request, userId: await newAccountId() })

    const payment = await db.transaction((trx) => recordVerifiedPayment(trx, verified))
    assert.equal(payment.signature, tx.signature)
    assert.equal(payment.amountBaseUnits, STARTER_LAMPORTS.toString())
    assert.equal(payment.status, 'completed')

    // Recording it again (same account, or another that verified it before the first commit).
    await rejection(
      assert,
      db.transaction((trx) => recordVerifiedPayment(trx, verified)),
      'replay'
    )
    await rejection(
      assert,
      db.transaction((trx) => recordVerifiedPayment(trx, other)),
      'replay'
    )
    // Verifying it again is refused up front.
    const message = await rejection(assert, verifyPayment(request), 'replay')
    assert.include(message, 'already used')
    await rejection(assert, verifyPayment({ ...request, userId: await newAccountId() }), 'replay')

    const rows = await Payment.query().where('signature', tx.signature)
    assert.lengthOf(rows, 1)
    assert.equal(rows[0].userId, request.userId)
  })

  test('two concurrent records of one signature: exactly one succeeds', async ({ assert }) => {
    const { wallet, tx } = await solPayment(STARTER_LAMPORTS)
    const first = await verifyPayment(input(tx.signature, { linkedWallet: wallet.address }))
    const second = await verifyPayment(input(tx.signature, { linkedWallet: wallet.address }))
    const activations: string[] = []

    const attempt = (verified: typeof first) =>
      db.transaction(async (trx) => {
        const payment = await recordVerifiedPayment(trx, verified)
        // Hold the transaction open so the other attempt overlaps it.
        await sleep(150)
        activations.push(verified.userId)
        return payment
      })
    const results = await Promise.allSettled([attempt(first), attempt(second)])

    const fulfilled = results.filter((result) => result.status === 'fulfilled')
    const rejected = results.filter((result) => result.status === 'rejected')
    assert.lengthOf(fulfilled, 1)
    assert.lengthOf(rejected, 1)
    const reason = (rejected[0] as PromiseRejectedResult).reason
    assert.instanceOf(reason, PaymentRejectedException)
    assert.equal((reason as PaymentRejectedException).check, 'replay')
    assert.lengthOf(activations, 1)
    assert.lengthOf(await Payment.query().where('signature', tx.signature), 1)
  })

  test('a quote is consumed by the payment that used it', async ({ assert }) => {
    const userId = await newAccountId()
    const quote = await createQuote({ userId, purchase: starter, token: 'sol' })
    const stranger = await world.chain.wallet(2)
    const pay = () =>
      world.chain.transferSol({
        from: stranger,
        to: world.treasury,
        lamports: BigInt(quote.amountBaseUnits),
        memo: quote.memo,
      })
    const firstTx = await pay()
    const secondTx = await pay()
    const first = await verifyPayment({
      signature: firstTx.signature,
      userId,
      token: 'sol',
      purchase: starter,
    })
    const second = await verifyPayment({
      signature: secondTx.signature,
      userId,
      token: 'sol',
      purchase: starter,
    })
    const payment = await db.transaction((trx) => recordVerifiedPayment(trx, first))
    assert.equal(payment.quoteId, quote.quoteId)
    await rejection(
      assert,
      db.transaction((trx) => recordVerifiedPayment(trx, second)),
      'quote'
    )
    await rejection(
      assert,
      verifyPayment({ signature: secondTx.signature, userId, token: 'sol', purchase: starter }),
      'quote'
    )
    // The refused record left nothing behind.
    assert.isNull(await Payment.findBy('signature', secondTx.signature))
  })
})
