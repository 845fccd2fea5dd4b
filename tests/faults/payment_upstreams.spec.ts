import { test } from '@japa/runner'
import type { Assert } from '@japa/assert'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'
import { startPaymentWorld, type PaymentWorld } from '#tests/helpers/solana/payment_world'
import { payCreditsPack } from '#tests/helpers/solana/payment_stand_ins'

/**
 * The Solana RPC node and the price feed fail for real under a running
 * service (a closed port, a node that never answers): a payment or quote
 * gets a bounded, clear 503 and nothing is applied; once the upstream is
 * back the same payment goes through, exactly once.
 */
const PACK_CREDITS = 25_000
/** What "promptly" means here: far below any client timeout, generous for a loaded machine. */
const PROMPT_MS = 5_000
/** The service's bound on one RPC request (app/billing/services/solana_rpc.ts), plus slack. */
const RPC_BOUND_MS = 10_000

function portOf(url: string): number {
  return Number(new URL(url).port)
}

test.group('Fault: the Solana RPC node or the price feed is down or hangs', (group) => {
  let world: PaymentWorld
  let service: ServiceUnderFault
  /** A price id of this run's own: no price cached by another run can answer for the feed. */
  const priceId = `fault-token-${Date.now()}`

  group.setup(async () => {
    world = await startPaymentWorld()
    world.prices.prices[priceId] = 0.02
    service = await startServiceUnderFault({
      SOLANA_RPC_URL: world.rpc.url,
      TREASURY_ADDRESS: world.treasury,
      USDC_MINT: world.usdc.address,
      PLATFORM_TOKEN_MINT: world.platform.address,
      PLATFORM_TOKEN_PRICE_ID: priceId,
      PRICE_API_URL: world.prices.url,
    })
    return async () => {
      await service.destroy()
      await world.close()
    }
  })

  async function timed<T>(work: () => Promise<T>): Promise<{ answer: T; ms: number }> {
    const started = Date.now()
    const answer = await work()
    return { answer, ms: Date.now() - started }
  }

  function assertUnavailable(assert: Assert, answer: { status: number; body: any }, what: RegExp) {
    assert.equal(answer.status, 503, JSON.stringify(answer.body))
    assert.deepEqual(Object.keys(answer.body).sort(), ['code', 'error', 'success'])
    assert.equal(answer.body.code, 'SERVER_ERROR')
    assert.match(answer.body.error, what)
  }

  /** An account with a linked wallet that paid a credit pack in USDC (not yet claimed). */
  async function paidPack() {
    const { token, email } = await service.signUpAccount()
    const wallet = await world.chain.wallet(5)
    await world.chain.mintTo(world.usdc, wallet.address, 100_000_000n)
    await service.query('update users set wallet_address = $1 where email = $2', [
      wallet.address,
      email,
    ])
    const body = await payCreditsPack(world, wallet)
    const balanceOf = async () => {
      const answer = await service.call('/ai-credits/balance', { token })
      return answer.body.data.balance as number
    }
    const buy = () =>
      service.call('/features/addon', { method: 'POST', token, json: body, timeoutMs: 60_000 })
    const recorded = async () => {
      const rows = await service.query(
        `select (select count(*) from payments where signature = $1)::int as payments,
                (select count(*) from credit_ledger l join users u on u.id = l.user_id
                  where u.email = $2 and l.kind = 'purchase')::int as purchases`,
        [body.txSignature, email]
      )
      return rows[0] as { payments: number; purchases: number }
    }
    return { balanceOf, buy, recorded }
  }

  /** Once the node is back: the same payment is applied, once; sending it again is refused. */
  async function assertAppliedOnce(assert: Assert, pack: Awaited<ReturnType<typeof paidPack>>) {
    const before = await pack.balanceOf()
    const applied = await pack.buy()
    assert.equal(applied.status, 200, JSON.stringify(applied.body))
    const again = await pack.buy()
    assert.equal(again.status, 400, JSON.stringify(again.body))
    assert.equal(again.body.code, 'VALIDATION_ERROR')
    assert.deepEqual(await pack.recorded(), { payments: 1, purchases: 1 })
    assert.equal(await pack.balanceOf(), before + PACK_CREDITS, 'credited once')
  }

  test('price feed down (connection refused) during a quote: a prompt 503, quotes again once it is back', async ({
    assert,
  }) => {
    const token = await service.signUp()
    const quote = () =>
      service.call('/features/quote', {
        method: 'POST',
        token,
        json: { tier: 'starter', paymentToken: 'platform' },
      })
    const port = portOf(world.prices.url)
    await world.prices.close()
    let down
    try {
      down = await timed(quote)
    } finally {
      await world.prices.start(port)
    }
    assertUnavailable(assert, down.answer, /price/i)
    assert.isBelow(down.ms, PROMPT_MS, 'answered promptly')
    const back = await quote()
    assert.equal(back.status, 200, JSON.stringify(back.body))
    console.log(`    price feed down: quote answered 503 in ${down.ms} ms; 200 once it was back`)
  }).timeout(60_000)

  test('Solana RPC down (connection refused) during a payment: a prompt 503, nothing applied; the same payment applies once when it is back', async ({
    assert,
  }) => {
    const pack = await paidPack()
    const before = await pack.balanceOf()
    const port = portOf(world.rpc.url)
    await world.rpc.close()
    let down
    try {
      down = await timed(pack.buy)
      assertUnavailable(assert, down.answer, /Solana RPC/)
      assert.isBelow(down.ms, PROMPT_MS, 'answered promptly')
      assert.deepEqual(await pack.recorded(), { payments: 0, purchases: 0 }, 'nothing applied')
      assert.equal(await pack.balanceOf(), before)
    } finally {
      await world.rpc.start(port)
    }
    await assertAppliedOnce(assert, pack)
    console.log(
      `    Solana RPC down: payment answered 503 in ${down.ms} ms; applied once when back`
    )
  }).timeout(120_000)

  test('Solana RPC hangs during a payment: a 503 within its bound, nothing applied; the same payment applies once when it answers again', async ({
    assert,
  }) => {
    const pack = await paidPack()
    const before = await pack.balanceOf()
    world.rpc.hang = true
    let hung
    try {
      hung = await timed(pack.buy)
      assertUnavailable(assert, hung.answer, /Solana RPC/)
      // Bounded by the RPC timeout (a verification may make a few calls before the hung one).
      assert.isBelow(hung.ms, RPC_BOUND_MS + 15_000, 'answered within the bound, not a hang')
      assert.deepEqual(await pack.recorded(), { payments: 0, purchases: 0 }, 'nothing applied')
      assert.equal(await pack.balanceOf(), before)
    } finally {
      world.rpc.hang = false
    }
    await assertAppliedOnce(assert, pack)
    console.log(
      `    Solana RPC hangs: payment answered 503 after ${hung.ms} ms (bound ${RPC_BOUND_MS} ms); applied once when it answered again`
    )
  }).timeout(120_000)
})
