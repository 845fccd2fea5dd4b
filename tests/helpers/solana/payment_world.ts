import { clearPriceCache } from '#billing/services/price_feed'
import { setPaymentEnv } from '#tests/helpers/solana/payment_env'
import {
  startPaymentStandIns,
  PLATFORM_PRICE_ID,
  type PaymentStandIns,
} from '#tests/helpers/solana/payment_stand_ins'
import { createUser } from '#tests/helpers/identity'

export { PLATFORM_PRICE_ID }

/** Everything a payment test needs: a chain, its RPC node, a price feed, the configured addresses. */
export type PaymentWorld = Omit<PaymentStandIns, 'env'>

/**
 * Starts the payment stand-ins (payment_stand_ins.ts: a local chain with USDC
 * and platform-token mints, its RPC node, a price feed at SOL 150 USD and
 * platform token 0.02 USD) and points the payment variables at them until close().
 */
export async function startPaymentWorld(): Promise<PaymentWorld> {
  const { env, close, ...world } = await startPaymentStandIns()
  const restoreEnv = setPaymentEnv(env)
  await clearPriceCache()
  return {
    ...world,
    async close() {
      restoreEnv()
      await clearPriceCache()
      await close()
    },
  }
}

/** A real account's id (quotes and payments reference users). */
export async function newAccountId(): Promise<string> {
  const user = await createUser()
  return user.id
}
