import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import Payment from '#billing/models/payment'
import { clearPriceCache } from '#billing/services/price_feed'
import { createUser, jwtFor, reloadUser } from '#tests/helpers/identity'
import { startPaymentWorld, type PaymentWorld } from '#tests/helpers/solana/payment_world'

/** 99 USD at the harness price of 150 USD per SOL. */
const FOUNDING_LAMPORTS = 660_000_000n
const STARTER_LAMPORTS = 46_600_000n

test.group('Founding Member slots', (group) => {
  let world: PaymentWorld
  group.setup(async () => {
    world = await startPaymentWorld()
    return () => world.close()
  })
  group.each.setup(async () => {
    await clearPriceCache()
    // This file owns the slot table: start every test with all 20 slots free.
    await db.from('founding_slots').delete()
  })

  async function buyer() {
    const user = await createUser()
    const wallet = await world.chain.wallet(3)
    user.walletAddress = wallet.address
    await user.save()
    const tx = await world.chain.transferSol({
      from: wallet,
      to: world.treasury,
      lamports: FOUNDING_LAMPORTS,
    })
    return { user, wallet, jwt: jwtFor(user), signature: tx.signature }
  }

  test('25 concurrent buyers for 20 slots: exactly 20 sold, each slot once', async ({
    client,
    assert,
  }) => {
    // The local chain signs one transaction at a time; the purchases then race.
    const buyers = []
    for (let i = 0; i < 25; i++) buyers.push(await buyer())
    const responses = await Promise.all(
      buyers.map((b) =>
        client
          .post('/features/subscribe')
          .bearerToken(b.jwt)
          .json({ tier: 'founding_member', txSignature: b.signature, paymentToken: 'sol' })
      )
    )

    const won = responses.filter((response) => response.status() === 200)
    const lost = responses.filter((response) => response.status() !== 200)
    assert.lengthOf(won, 20)
    assert.lengthOf(lost, 5)
    for (const response of lost) {
      assert.equal(response.status(), 400)
      assert.equal(response.body().code, 'VALIDATION_ERROR')
      assert.match(response.body().error, /sold/)
    }
    const slots = won.map((response) => response.body().data.foundingSlot).sort((a, b) => a - b)
    assert.deepEqual(
      slots,
      Array.from({ length: 20 }, (_, i) => i + 1)
    )
    for (const response of won) {
      assert.equal(response.body().data.tier, 'founding_member')
      assert.equal(response.body().data.billingPeriod, 'lifetime')
      assert.isNull(response.body().data.subscriptionExpiresAt)
      assert.equal(response.body().data.agentLimit, 10)
    }

    // The losers: no tier, no payment recorded.
    for (const [index, response] of responses.entries()) {
      const { user, signature } = buyers[index]
      const fresh = await reloadUser(user)
      const payment = await Payment.findBy('signature', signature)
      if (response.status() === 200) {
        assert.equal(fresh.tier, 'founding_member')
        assert.isNull(fresh.subscriptionExpiresAt)
        assert.isNotNull(payment)
      } else {
        assert.equal(fresh.tier, 'free')
        assert.isNull(payment)
      }
    }
    const rows = await db.from('founding_slots').select('slot', 'user_id')
    assert.lengthOf(rows, 20)
    assert.lengthOf(new Set(rows.map((row) => row.user_id)), 20)

    const features = await client.get('/features')
    assert.deepEqual(features.body().data.founding, { maxSlots: 20, taken: 20, remaining: 0 })

    // Sold out: refused up front, quotes too.
    const late = await buyer()
    const refused = await client
      .post('/features/subscribe')
      .bearerToken(late.jwt)
      .json({ tier: 'founding_member', txSignature: late.signature })
    refused.assertStatus(400)
    assert.match(refused.body().error, /sold/)
    const quote = await client
      .post('/features/quote')
      .bearerToken(late.jwt)
      .json({ tier: 'founding_member' })
    quote.assertStatus(400)
  })

  test('a Founding Member is lifetime: buying it or a lower tier again is refused', async ({
    client,
    assert,
  }) => {
    const member = await buyer()
    const bought = await client
      .post('/features/subscribe')
      .bearerToken(member.jwt)
      .json({ tier: 'founding_member', txSignature: member.signature })
    bought.assertStatus(200)
    assert.equal(bought.body().data.foundingSlot, 1)
    assert.equal(bought.body().data.aiCreditsBalance, 25_000)

    const again = await world.chain.transferSol({
      from: member.wallet,
      to: world.treasury,
      lamports: FOUNDING_LAMPORTS,
    })
    const twice = await client
      .post('/features/subscribe')
      .bearerToken(member.jwt)
      .json({ tier: 'founding_member', txSignature: again.signature })
    twice.assertStatus(400)
    const lower = await world.chain.transferSol({
      from: member.wallet,
      to: world.treasury,
      lamports: STARTER_LAMPORTS,
    })
    const downgrade = await client
      .post('/features/subscribe')
      .bearerToken(member.jwt)
      .json({ tier: 'starter', txSignature: lower.signature })
    downgrade.assertStatus(400)
    assert.isNull(await Payment.findBy('signature', lower.signature))
    const fresh = await reloadUser(member.user)
    assert.equal(fresh.tier, 'founding_member')
  })
})
