import env from '#start/env'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'

/**
 * Payment settings read from the environment on every call (never cached), so
 * an operator's change and a test's override both apply at once.
 */
export type PaymentSetting =
  | 'SOLANA_RPC_URL'
  | 'TREASURY_ADDRESS'
  | 'USDC_MINT'
  | 'PLATFORM_TOKEN_MINT'
  | 'PLATFORM_TOKEN_PRICE_ID'
  | 'PRICE_API_URL'

const purposes: Record<PaymentSetting, string> = {
  SOLANA_RPC_URL: 'on-chain payments cannot be verified',
  TREASURY_ADDRESS: 'on-chain payments cannot be verified',
  USDC_MINT: 'USDC payments cannot be verified',
  PLATFORM_TOKEN_MINT: 'platform-token payments cannot be verified',
  PLATFORM_TOKEN_PRICE_ID: 'platform-token payments are not accepted',
  PRICE_API_URL: 'prices in SOL and the platform token are unavailable',
}

/** The value of a payment setting, or undefined when unset or blank. */
export function paymentSetting(name: PaymentSetting): string | undefined {
  const value = env.get(name)
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined
}

/**
 * The value of a payment setting; an unset one refuses the request with 503
 * naming the variable (CONTRACT.md: "a clear error saying which variable is missing").
 */
export function requirePaymentSetting(name: PaymentSetting): string {
  const value = paymentSetting(name)
  if (!value) {
    throw new ServiceUnavailableException(
      `Payments are not configured: ${name} is not set, so ${purposes[name]}`
    )
  }
  return value
}

/**
 * What the agent-limit error adds where payments cannot be taken: who can
 * raise the limit instead (docs/billing.md).
 */
export function planHintWithoutPayments(): string {
  return paymentSetting('SOLANA_RPC_URL') && paymentSetting('TREASURY_ADDRESS')
    ? ''
    : ' Payments are not configured on this service: an operator can set your plan in the console (Accounts, Set plan).'
}
