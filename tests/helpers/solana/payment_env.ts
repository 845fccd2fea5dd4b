import env from '#start/env'

export type PaymentEnvKey =
  | 'SOLANA_RPC_URL'
  | 'TREASURY_ADDRESS'
  | 'USDC_MINT'
  | 'PLATFORM_TOKEN_MINT'
  | 'PLATFORM_TOKEN_PRICE_ID'
  | 'PRICE_API_URL'
  | 'REDIS_URL'
  | 'TOKEN_PRICE_API_URL'

/**
 * Sets payment variables for a test (an empty string unsets one) and returns
 * a function that puts the previous values back.
 */
export function setPaymentEnv(values: Partial<Record<PaymentEnvKey, string>>): () => void {
  const previous = new Map<PaymentEnvKey, string | undefined>()
  for (const [key, value] of Object.entries(values) as [PaymentEnvKey, string][]) {
    if (!previous.has(key)) previous.set(key, env.get(key) as string | undefined)
    env.set(key, value)
  }
  return () => {
    for (const [key, value] of previous) {
      env.set(key, value ?? '')
      if (value === undefined) delete process.env[key]
    }
  }
}
