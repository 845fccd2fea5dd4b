import { setTimeout as sleep } from 'node:timers/promises'
import { test } from '@japa/runner'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'
import { startPaymentWorld, type PaymentWorld } from '#tests/helpers/solana/payment_world'

/**
 * kill -9 of the service at points spread over a payment (verification on
 * the chain, then recording it, crediting and notifying). The client then
 * sends the same payment again, as a client whose request failed would:
 * every payment ends up applied exactly once, never half and never twice.
 */
const KILL_AFTER_MS = [0, 5, 10, 20, 35, 60]
const CREDITS_PACK_USDC = 30_000_000n
const PACK_CREDITS = 25_000

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
      const tx = await world.chain.transferToken({
        mint: world.usdc,
        from: wallet,
        toOwner: world.treasury,
        amount: CREDITS_PACK_USDC,
      })
      const body = {
        addonKey: 'addon.ai_credits.25000',
        txSignature: tx.signature,
        paymentToken: 'usdc',
      }
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
        tx.signature,
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
})
