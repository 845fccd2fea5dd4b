import { setTimeout as sleep } from 'node:timers/promises'
import { test } from '@japa/runner'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'
import { startPaymentWorld, type PaymentWorld } from '#tests/helpers/solana/payment_world'
import { payCreditsPack } from '#tests/helpers/solana/payment_stand_ins'

/**
 * kill -9 of the service at points spread over a payment (verification on
 * the chain, then recording it, crediting and notifying). The client then
 * sends the same payment again, as a client whose request failed would:
 * every payment ends up applied exactly once, never half and never twice,
 * and a Founding Member slot is taken once, only with its payment.
 */
const KILL_AFTER_MS = [0, 5, 10, 20, 35, 60]
const PACK_CREDITS = 25_000
/** Kill points as fractions of a whole Founding Member purchase. */
const FOUNDING_KILL_AT = [0.5, 0.85, 1]
/** The Founding Member price, 99 USD, in USDC base units. */
const FOUNDING_USDC = 99_000_000n

test.group('Fault: the service is killed (-9) in the middle of a payment', (group) => {
  let world: PaymentWorld
  let service: ServiceUnderFault

  group.setup(async () => {
    world = await startPaymentWorld()
    service = await startServiceUnderFault({
      SOLANA_RPC_URL: world.rpc.url,
      TREASURY_ADDRESS: world.treasury,
      USDC_MINT: world.usdc.address,
      PLATFORM_TOKEN_MINT: world.platform.address,
      PRICE_API_URL: world.prices.url,
    })
    return async () => {
      await service.destroy()
      await world.close()
    }
  })

  const query = (sql: string, values: unknown[]) => service.query(sql, values)

  test('each payment is applied exactly once, whatever point the kill hit', async ({ assert }) => {
    const { token, email } = await service.signUpAccount()
    const wallet = await world.chain.wallet(5)
    await world.chain.mintTo(world.usdc, wallet.address, 1_000_000_000n)
    await query('update users set wallet_address = $1 where email = $2', [wallet.address, email])
    const balanceOf = async () => {
      const answer = await service.call('/ai-credits/balance', { token })
      return answer.body.data.balance as number
    }
    const startBalance = await balanceOf()

    const outcomes: string[] = []
    for (const ms of KILL_AFTER_MS) {
      const body = await payCreditsPack(world, wallet)
      const first = service
        .call('/features/addon', { method: 'POST', token, json: body })
        .catch((error: Error) => error)
      await sleep(ms)
      await service.kill9()
      const firstAnswer = await first
      await service.restart()
      // The client did not get (or did not trust) an answer: it sends the payment again.
      const retry = await service.call('/features/addon', { method: 'POST', token, json: body })
      const applied = firstAnswer instanceof Error ? 'cut' : String(firstAnswer.status)
      outcomes.push(`${ms} ms: first ${applied}, retry ${retry.status}`)
      assert.include([200, 400], retry.status, JSON.stringify(retry.body))
      if (retry.status === 400) assert.equal(retry.body.code, 'VALIDATION_ERROR')

      const payments = await query('select status from payments where signature = $1', [
        body.txSignature,
      ])
      assert.lengthOf(payments, 1, `the payment of round ${ms} ms is recorded once`)
    }
    console.log(`    kill -9 mid-payment: ${outcomes.join('; ')}`)

    const purchases = await query(
      `select l.credits from credit_ledger l join users u on u.id = l.user_id
       where u.email = $1 and l.kind = 'purchase'`,
      [email]
    )
    assert.lengthOf(purchases, KILL_AFTER_MS.length, 'one credit purchase per payment')
    assert.equal(await balanceOf(), startBalance + PACK_CREDITS * KILL_AFTER_MS.length)
  }).timeout(300_000)

  test('a Founding Member purchase cut by a kill takes a slot at most once and only with its payment applied', async ({
    assert,
  }) => {
    const slotsTaken = async () => {
      const [row] = await query('select count(*)::int as taken from founding_slots', [])
      return row.taken as number
    }
    // One buyer each: a lifetime tier is bought once.
    const buyer = async () => {
      const { token, email } = await service.signUpAccount()
      const wallet = await world.chain.wallet(5)
      await world.chain.mintTo(world.usdc, wallet.address, FOUNDING_USDC)
      await query('update users set wallet_address = $1 where email = $2', [wallet.address, email])
      const tx = await world.chain.transferToken({
        mint: world.usdc,
        from: wallet,
        toOwner: world.treasury,
        amount: FOUNDING_USDC,
      })
      const body = { tier: 'founding_member', txSignature: tx.signature, paymentToken: 'usdc' }
      return { token, email, tx, body }
    }
    const slotsBefore = await slotsTaken()
    // A whole purchase, timed: the kills are spread over its end, where the slot is taken.
    const reference = await buyer()
    const started = Date.now()
    const bought = await service.call('/features/subscribe', {
      method: 'POST',
      token: reference.token,
      json: reference.body,
    })
    const fullMs = Date.now() - started
    assert.equal(bought.status, 200, JSON.stringify(bought.body))
    const outcomes: string[] = []
    for (const fraction of FOUNDING_KILL_AT) {
      const ms = Math.round(fullMs * fraction)
      const { token, email, tx, body } = await buyer()
      const first = service
        .call('/features/subscribe', { method: 'POST', token, json: body })
        .catch((error: Error) => error)
      await sleep(ms)
      await service.kill9()
      const firstAnswer = await first
      await service.restart()

      // Right after the restart: a slot exists exactly when its payment does, and names it.
      const state = async () =>
        query(
          `select (select count(*) from payments where signature = $1)::int as payments,
                  (select count(*) from founding_slots s join payments p on p.id = s.payment_id
                    where p.signature = $1)::int as paid_slots,
                  (select count(*) from founding_slots s join users u on u.id = s.user_id
                    where u.email = $2)::int as slots,
                  (select tier from users where email = $2) as tier`,
          [tx.signature, email]
        ).then((rows) => rows[0])
      const cut = await state()
      assert.equal(cut.slots, cut.payments, `${ms} ms: a slot only with its payment`)
      assert.equal(cut.paid_slots, cut.slots, `${ms} ms: the slot names the payment`)
      assert.equal(cut.tier === 'founding_member', cut.payments === 1, `${ms} ms: tier with it`)

      const retry = await service.call('/features/subscribe', { method: 'POST', token, json: body })
      assert.include([200, 400], retry.status, JSON.stringify(retry.body))
      const done = await state()
      assert.deepInclude(done, { payments: 1, paid_slots: 1, slots: 1, tier: 'founding_member' })
      const applied = firstAnswer instanceof Error ? 'cut' : String(firstAnswer.status)
      outcomes.push(`${ms} ms: first ${applied}, applied before the retry ${cut.payments === 1}`)
    }
    console.log(
      `    kill -9 mid-Founding Member purchase (a whole one takes ${fullMs} ms): ${outcomes.join('; ')}`
    )
    assert.equal(
      await slotsTaken(),
      slotsBefore + 1 + FOUNDING_KILL_AT.length,
      'one slot per buyer, none lost or doubled'
    )
  }).timeout(300_000)
})
