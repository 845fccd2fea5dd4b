import { test } from '@japa/runner'
import type { Assert } from '@japa/assert'
import { DateTime } from 'luxon'
import type { KeyPairSigner } from '@solana/kit'
import db from '@adonisjs/lucid/services/db'
import Payment from '#billing/models/payment'
import AddonSubscription from '#billing/models/addon_subscription'
import { clearPriceCache } from '#billing/services/price_feed'
import { exportSections } from '#identity/services/export_sections'
import type User from '#identity/models/user'
import { createUser, creditsOf, jwtFor, reloadUser } from '#tests/helpers/identity'
import { startPaymentWorld, type PaymentWorld } from '#tests/helpers/solana/payment_world'
import { payCreditsPack } from '#tests/helpers/solana/payment_stand_ins'

/** Catalogue prices at the harness feed price of 150 USD per SOL, rounded up. */
const STARTER_LAMPORTS = 46_600_000n
const PRO_LAMPORTS = 133_266_667n
const PRO_ANNUAL_LAMPORTS = 1_332_666_667n
const AGENTS_PACK_USDC = 6_990_000n

interface Buyer {
  user: User
  wallet: KeyPairSigner
  jwt: string
}

async function signatureOf(transaction: Promise<{ signature: string }>): Promise<string> {
  const { signature } = await transaction
  return signature
}

/** Everything a refused payment must leave as it was. */
async function snapshot(user: { id: string }) {
  const fresh = await reloadUser(user)
  const count = async (table: string) => {
    const row = await db.from(table).where('user_id', user.id).count('* as n').first()
    return Number(row.n)
  }
  return {
    tier: fresh.tier,
    subscriptionExpiresAt: fresh.subscriptionExpiresAt?.toISO() ?? null,
    aiCreditsBalance: fresh.aiCreditsBalance,
    payments: await count('payments'),
    addons: await count('addon_subscriptions'),
    ledger: await count('credit_ledger'),
    notifications: await count('notifications'),
  }
}

test.group('Plans paid on chain through the HTTP routes', (group) => {
  let world: PaymentWorld
  group.setup(async () => {
    world = await startPaymentWorld()
    return () => world.close()
  })
  group.each.setup(async () => {
    world.prices.failWithStatus = null
    world.rpc.failWithStatus = null
    await clearPriceCache()
  })

  /** An account whose linked wallet holds SOL and USDC. */
  async function buyer(options: { tier?: User['tier'] } = {}): Promise<Buyer> {
    const user = await createUser({ tier: options.tier })
    const wallet = await world.chain.wallet(5)
    await world.chain.mintTo(world.usdc, wallet.address, 100_000_000n)
    user.walletAddress = wallet.address
    await user.save()
    return { user, wallet, jwt: jwtFor(user) }
  }

  function paySol(
    from: KeyPairSigner,
    lamports: bigint,
    extra: { memo?: string; fail?: boolean } = {}
  ) {
    return world.chain.transferSol({ from, to: world.treasury, lamports, ...extra })
  }

  async function refused(
    assert: Assert,
    response: any,
    before: Awaited<ReturnType<typeof snapshot>>,
    user: User,
    pattern: RegExp
  ) {
    response.assertStatus(400)
    assert.equal(response.body().code, 'VALIDATION_ERROR')
    assert.match(response.body().error, pattern)
    assert.deepEqual(await snapshot(user), before)
  }

  test('valid SOL payment: the tier is active, the payment stored, exported and notified', async ({
    client,
    assert,
  }) => {
    const { user, wallet, jwt } = await buyer()
    const tx = await paySol(wallet, PRO_LAMPORTS)
    const response = await client
      .post('/features/subscribe')
      .bearerToken(jwt)
      .json({ tier: 'pro', txSignature: tx.signature, paymentToken: 'sol', solAmount: 0.0001 })
    response.assertStatus(200)
    const data = response.body().data
    assert.equal(data.tier, 'pro')
    assert.equal(data.billingPeriod, 'monthly')
    assert.isNull(data.foundingSlot)
    assert.equal(data.agentLimit, 3)
    const expires = DateTime.fromISO(data.subscriptionExpiresAt)
    assert.approximately(expires.toMillis(), DateTime.utc().plus({ months: 1 }).toMillis(), 60_000)
    assert.deepInclude(data.payment, {
      signature: tx.signature,
      token: 'sol',
      amount: '0.133266667',
      amountBaseUnits: PRO_LAMPORTS.toString(),
      decimals: 9,
      mint: null,
      usdValue: 19.99,
      payer: wallet.address,
      status: 'completed',
      purchase: { kind: 'tier', key: 'pro', billingPeriod: 'monthly' },
    })
    // This month's Pro credits came with the plan.
    assert.equal(data.aiCreditsBalance, 15_000)

    const account = await client.get('/features/account').bearerToken(jwt)
    assert.equal(account.body().data.tier, 'pro')
    assert.equal(account.body().data.subscriptionExpiresAt, data.subscriptionExpiresAt)

    const notes = await db
      .from('notifications')
      .where('user_id', user.id)
      .where('type', 'subscription_activated')
    assert.lengthOf(notes, 1)

    const collect = exportSections.entries().find(([name]) => name === 'payments')![1]
    const exported = (await collect(user.id)) as any[]
    assert.lengthOf(exported, 1)
    assert.deepInclude(exported[0], {
      signature: tx.signature,
      currency: 'sol',
      purchased: 'pro',
      amountBaseUnits: PRO_LAMPORTS.toString(),
      usdValue: 19.99,
      status: 'completed',
    })
  })

  test('renewing the same tier extends from the current expiry; annual adds 12 months', async ({
    client,
    assert,
  }) => {
    const { user, wallet, jwt } = await buyer()
    const first = await client
      .post('/features/subscribe')
      .bearerToken(jwt)
      .json({ tier: 'pro', txSignature: await signatureOf(paySol(wallet, PRO_LAMPORTS)) })
    first.assertStatus(200)
    const firstExpiry = DateTime.fromISO(first.body().data.subscriptionExpiresAt)

    const second = await client
      .post('/features/subscribe')
      .bearerToken(jwt)
      .json({ tier: 'pro', txSignature: await signatureOf(paySol(wallet, PRO_LAMPORTS)) })
    second.assertStatus(200)
    const secondExpiry = DateTime.fromISO(second.body().data.subscriptionExpiresAt)
    assert.equal(secondExpiry.toMillis(), firstExpiry.plus({ months: 1 }).toMillis())

    const annual = await client
      .post('/features/subscribe')
      .bearerToken(jwt)
      .json({
        tier: 'pro',
        billingPeriod: 'annual',
        txSignature: await signatureOf(paySol(wallet, PRO_ANNUAL_LAMPORTS)),
      })
    annual.assertStatus(200)
    assert.equal(annual.body().data.billingPeriod, 'annual')
    assert.equal(
      DateTime.fromISO(annual.body().data.subscriptionExpiresAt).toMillis(),
      secondExpiry.plus({ months: 12 }).toMillis()
    )
    // One month's grant, however often the plan was renewed this month.
    assert.equal(await creditsOf(user), 15_000)
    assert.lengthOf(await Payment.query().where('user_id', user.id), 3)
  })

  test('valid USDC into the treasury token account created in the same transaction: agent pack', async ({
    client,
    assert,
  }) => {
    const { user, wallet, jwt } = await buyer()
    const treasuryAccount = await world.chain.associatedTokenAddress(world.treasury, world.usdc)
    // The treasury has no USDC account yet: this payment creates it.
    assert.isNull(world.chain.tokenAccount(treasuryAccount))
    const tx = await world.chain.transferToken({
      mint: world.usdc,
      from: wallet,
      toOwner: world.treasury,
      amount: AGENTS_PACK_USDC,
    })
    const response = await client.post('/features/addon').bearerToken(jwt).json({
      addonKey: 'addon.agents.3',
      txSignature: tx.signature,
      paymentToken: 'usdc',
      billingPeriod: 'monthly',
    })
    response.assertStatus(200)
    const data = response.body().data
    const index = tx.accountKeys.indexOf(treasuryAccount)
    assert.isFalse(tx.preTokenBalances.has(index))
    assert.equal(tx.postTokenBalances.get(index)?.amount, AGENTS_PACK_USDC)
    assert.deepInclude(data.addon, { key: 'addon.agents.3', type: 'subscription', extraAgents: 3 })
    assert.approximately(
      DateTime.fromISO(data.addon.expiresAt).toMillis(),
      DateTime.utc().plus({ months: 1 }).toMillis(),
      60_000
    )
    assert.equal(data.agentLimit, 4)
    assert.lengthOf(data.activeAddons, 1)
    assert.deepInclude(data.payment, { token: 'usdc', amount: '6.99', decimals: 6, usdValue: 6.99 })

    const account = await client.get('/features/account').bearerToken(jwt)
    assert.equal(account.body().data.agentLimit, 4)
    assert.lengthOf(await AddonSubscription.query().where('user_id', user.id), 1)

    // A second pack adds up.
    const again = await world.chain.transferToken({
      mint: world.usdc,
      from: wallet,
      toOwner: world.treasury,
      amount: AGENTS_PACK_USDC,
    })
    const second = await client.post('/features/addon').bearerToken(jwt).json({
      addonKey: 'addon.agents.3',
      txSignature: again.signature,
      paymentToken: 'usdc',
    })
    second.assertStatus(200)
    assert.equal(second.body().data.agentLimit, 7)
  })

  test('AI Credit pack: +25,000 through the ledger (kind purchase), once', async ({
    client,
    assert,
  }) => {
    const { user, wallet, jwt } = await buyer()
    const body = await payCreditsPack(world, wallet)
    const response = await client.post('/features/addon').bearerToken(jwt).json(body)
    response.assertStatus(200)
    assert.equal(response.body().data.aiCreditsBalance, 25_000)
    assert.isNull(response.body().data.addon.expiresAt)
    const entries = await db
      .from('credit_ledger')
      .where('user_id', user.id)
      .where('kind', 'purchase')
    assert.lengthOf(entries, 1)
    assert.equal(entries[0].credits, 25_000)

    const replay = await client.post('/features/addon').bearerToken(jwt).json(body)
    replay.assertStatus(400)
    assert.equal(await creditsOf(user), 25_000)
  })

  test('wrong recipient, too little, failed, not finalized, too old: 400 and nothing changes', async ({
    client,
    assert,
  }) => {
    const { user, wallet, jwt } = await buyer()
    const before = await snapshot(user)
    const submit = (txSignature: string) =>
      client.post('/features/subscribe').bearerToken(jwt).json({ tier: 'pro', txSignature })

    const stranger = await world.chain.wallet(0)
    const elsewhere = await world.chain.transferSol({
      from: wallet,
      to: stranger.address,
      lamports: PRO_LAMPORTS,
    })
    await refused(assert, await submit(elsewhere.signature), before, user, /treasury/)

    const short = await paySol(wallet, (PRO_LAMPORTS * 97n) / 100n)
    await refused(assert, await submit(short.signature), before, user, /was due/)

    const failed = await paySol(wallet, PRO_LAMPORTS, { fail: true })
    await refused(assert, await submit(failed.signature), before, user, /failed/)

    const pending = await paySol(wallet, PRO_LAMPORTS)
    world.chain.setCommitment(pending.signature, 'confirmed')
    await refused(assert, await submit(pending.signature), before, user, /not finalized/)

    const old = await paySol(wallet, PRO_LAMPORTS)
    world.chain.setBlockTime(old.signature, Math.floor(Date.now() / 1000) - 31 * 60)
    await refused(assert, await submit(old.signature), before, user, /30 minutes/)

    // Once finalized, the pending one goes through.
    world.chain.setCommitment(pending.signature, 'finalized')
    const accepted = await submit(pending.signature)
    accepted.assertStatus(200)
  })

  test('not signed by the linked wallet: 400; with no wallet and no memo: 400', async ({
    client,
    assert,
  }) => {
    const { user, jwt } = await buyer()
    const other = await world.chain.wallet(2)
    const before = await snapshot(user)
    const tx = await paySol(other, PRO_LAMPORTS)
    const response = await client
      .post('/features/subscribe')
      .bearerToken(jwt)
      .json({ tier: 'pro', txSignature: tx.signature })
    await refused(assert, response, before, user, /not signed by the wallet linked/)

    const walletless = await createUser()
    const nobody = await snapshot(walletless)
    const tx2 = await paySol(other, PRO_LAMPORTS)
    const second = await client
      .post('/features/subscribe')
      .bearerToken(jwtFor(walletless))
      .json({ tier: 'pro', txSignature: tx2.signature })
    await refused(assert, second, nobody, walletless, /No wallet is linked/)
  })

  test('replay: by the same account and by another account, 400 and nothing changes', async ({
    client,
    assert,
  }) => {
    const alice = await buyer()
    const bob = await buyer()
    const tx = await paySol(alice.wallet, STARTER_LAMPORTS)
    const body = { tier: 'starter', txSignature: tx.signature }
    const first = await client.post('/features/subscribe').bearerToken(alice.jwt).json(body)
    first.assertStatus(200)

    const aliceBefore = await snapshot(alice.user)
    const bobBefore = await snapshot(bob.user)
    const again = await client.post('/features/subscribe').bearerToken(alice.jwt).json(body)
    await refused(assert, again, aliceBefore, alice.user, /already used/)
    const stolen = await client.post('/features/subscribe').bearerToken(bob.jwt).json(body)
    await refused(assert, stolen, bobBefore, bob.user, /already used/)
  })

  test('two concurrent submissions of one signature: exactly one activation', async ({
    client,
    assert,
  }) => {
    const { user, wallet, jwt } = await buyer()
    const tx = await paySol(wallet, PRO_LAMPORTS)
    const send = () =>
      client
        .post('/features/subscribe')
        .bearerToken(jwt)
        .json({ tier: 'pro', txSignature: tx.signature })
    const responses = await Promise.all([send(), send(), send()])
    const statuses = responses.map((response) => response.status()).sort()
    assert.deepEqual(statuses, [200, 400, 400])
    for (const response of responses.filter((r) => r.status() === 400)) {
      assert.match(response.body().error, /already used/)
    }
    const fresh = await reloadUser(user)
    assert.approximately(
      fresh.subscriptionExpiresAt!.toMillis(),
      DateTime.utc().plus({ months: 1 }).toMillis(),
      60_000
    )
    assert.lengthOf(await Payment.query().where('signature', tx.signature), 1)
    const notes = await db
      .from('notifications')
      .where('user_id', user.id)
      .where('type', 'subscription_activated')
    assert.lengthOf(notes, 1)
  })

  test('quote memo path: any wallet pays the quoted amount with the memo', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const jwt = jwtFor(user)
    const quoted = await client
      .post('/features/quote')
      .bearerToken(jwt)
      .json({ tier: 'starter', paymentToken: 'sol', billingPeriod: 'monthly' })
    quoted.assertStatus(200)
    const quote = quoted.body().data
    assert.properties(quote, ['quoteId', 'amount', 'token', 'memo', 'expiresAt'])
    assert.equal(quote.token, 'sol')
    assert.equal(quote.recipient, world.treasury)
    assert.approximately(new Date(quote.expiresAt).getTime() - Date.now(), 15 * 60_000, 60_000)

    // Another account cannot use this account's quote.
    const intruder = await buyer()
    const friend = await world.chain.wallet(2)
    const foreign = await paySol(friend, BigInt(quote.amountBaseUnits), { memo: quote.memo })
    const intruderBefore = await snapshot(intruder.user)
    const stolen = await client
      .post('/features/subscribe')
      .bearerToken(intruder.jwt)
      .json({ tier: 'starter', txSignature: foreign.signature })
    await refused(assert, stolen, intruderBefore, intruder.user, /another account/)

    // Less than quoted is refused even though it is within the feed tolerance.
    const before = await snapshot(user)
    const short = await paySol(friend, BigInt(quote.amountBaseUnits) - 1n, { memo: quote.memo })
    const shortResponse = await client
      .post('/features/subscribe')
      .bearerToken(jwt)
      .json({ tier: 'starter', txSignature: short.signature })
    await refused(assert, shortResponse, before, user, /as quoted/)

    const paid = await client
      .post('/features/subscribe')
      .bearerToken(jwt)
      .json({ tier: 'starter', txSignature: foreign.signature })
    paid.assertStatus(200)
    assert.equal(paid.body().data.tier, 'starter')
    const payment = await Payment.findByOrFail('signature', foreign.signature)
    assert.equal(payment.quoteId, quote.quoteId)

    const addonQuote = await client
      .post('/features/quote')
      .bearerToken(jwt)
      .json({ addonKey: 'addon.ai_credits.25000', paymentToken: 'usdc' })
    addonQuote.assertStatus(200)
    assert.equal(addonQuote.body().data.amount, '30')
    const both = await client
      .post('/features/quote')
      .bearerToken(jwt)
      .json({ tier: 'pro', addonKey: 'addon.agents.3' })
    both.assertStatus(400)
  })

  test('price feed down: 503 with a clear message, nothing changes', async ({ client, assert }) => {
    const { user, wallet, jwt } = await buyer()
    const tx = await paySol(wallet, PRO_LAMPORTS)
    const before = await snapshot(user)
    world.prices.failWithStatus = 502
    await clearPriceCache()
    const response = await client
      .post('/features/subscribe')
      .bearerToken(jwt)
      .json({ tier: 'pro', txSignature: tx.signature })
    response.assertStatus(503)
    assert.match(response.body().error, /price/i)
    assert.deepEqual(await snapshot(user), before)
    const quote = await client.post('/features/quote').bearerToken(jwt).json({ tier: 'pro' })
    quote.assertStatus(503)

    // Nothing was recorded: once the feed is back the same transaction goes through.
    world.prices.failWithStatus = null
    await clearPriceCache()
    const later = await client
      .post('/features/subscribe')
      .bearerToken(jwt)
      .json({ tier: 'pro', txSignature: tx.signature })
    later.assertStatus(200)
  })

  test('switching tiers keeps the unused time at the price ratio', async ({ client, assert }) => {
    const { user, wallet, jwt } = await buyer()
    user.tier = 'starter'
    user.subscriptionExpiresAt = DateTime.utc().plus({ days: 20 })
    await user.save()
    const response = await client
      .post('/features/subscribe')
      .bearerToken(jwt)
      .json({ tier: 'pro', txSignature: await signatureOf(paySol(wallet, PRO_LAMPORTS)) })
    response.assertStatus(200)
    const carried = 20 * 86_400_000 * (6.99 / 19.99)
    assert.approximately(
      DateTime.fromISO(response.body().data.subscriptionExpiresAt).toMillis(),
      DateTime.utc().plus({ months: 1 }).toMillis() + carried,
      60_000
    )
  })

  test('request validation: 400 for free, unknown tokens and missing fields; 401 without JWT', async ({
    client,
  }) => {
    const { jwt } = await buyer()
    const signature = '5'.repeat(88)
    const cases: Record<string, unknown>[] = [
      { tier: 'free', txSignature: signature },
      { tier: 'gold', txSignature: signature },
      { tier: 'pro' },
      { tier: 'pro', txSignature: signature, paymentToken: 'btc' },
      { tier: 'pro', txSignature: signature, billingPeriod: 'weekly' },
    ]
    for (const body of cases) {
      const response = await client.post('/features/subscribe').bearerToken(jwt).json(body)
      response.assertStatus(400)
      response.assertBodyContains({ code: 'VALIDATION_ERROR' })
    }
    const addon = await client
      .post('/features/addon')
      .bearerToken(jwt)
      .json({ addonKey: 'addon.agents.99', txSignature: signature })
    addon.assertStatus(400)
    const anonymous = await client
      .post('/features/subscribe')
      .json({ tier: 'pro', txSignature: signature })
    anonymous.assertStatus(401)
  })

  test('a txSignature with characters outside base58: 400 naming it on both routes, not 500', async ({
    client,
    assert,
  }) => {
    const { user, jwt } = await buyer()
    const before = await snapshot(user)
    // 0, O, I and l are not base58 (found by the fuzz: the signature check threw).
    for (const txSignature of ['0'.repeat(64), `${'5'.repeat(80)}OIl0`]) {
      const subscribe = await client
        .post('/features/subscribe')
        .bearerToken(jwt)
        .json({ tier: 'pro', txSignature })
      await refused(assert, subscribe, before, user, /txSignature/)
      const addon = await client
        .post('/features/addon')
        .bearerToken(jwt)
        .json({ addonKey: 'addon.agents.3', txSignature })
      await refused(assert, addon, before, user, /txSignature/)
    }
  })
})
