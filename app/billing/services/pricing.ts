import {
  addons,
  annualPriceMultiplier,
  tiers,
  type AddonKey,
  type BillingPeriod,
  type TierKey,
} from '#config/plans'
import { ValidationException } from '#core/exceptions/api_exceptions'

/** Tokens a plan can be paid in (spec: `paymentToken`). */
export const paymentTokens = ['sol', 'usdc', 'platform'] as const
export type PaymentToken = (typeof paymentTokens)[number]

export function isPaymentToken(value: unknown): value is PaymentToken {
  return typeof value === 'string' && (paymentTokens as readonly string[]).includes(value)
}

/** Something a payment buys: a tier or an add-on, for a billing period. */
export type Purchase =
  | { kind: 'tier'; key: TierKey; billingPeriod: BillingPeriod }
  | { kind: 'addon'; key: AddonKey; billingPeriod: BillingPeriod }

/** True when the billing period changes the price and duration (not lifetime, not one-time). */
export function isPeriodic(purchase: Purchase): boolean {
  if (purchase.kind === 'tier') return !tiers[purchase.key].lifetime
  return addons[purchase.key].type === 'subscription'
}

/** "pro (annual)", "founding_member (lifetime)", "addon.ai_credits.25000 (one-time)". */
export function describePurchase(purchase: Purchase): string {
  if (isPeriodic(purchase)) return `${purchase.key} (${purchase.billingPeriod})`
  return `${purchase.key} (${purchase.kind === 'tier' ? 'lifetime' : 'one-time'})`
}

/** Two purchases buy the same thing (the billing period only matters when periodic). */
export function samePurchase(a: Purchase, b: Purchase): boolean {
  if (a.kind !== b.kind || a.key !== b.key) return false
  return !isPeriodic(a) || a.billingPeriod === b.billingPeriod
}

/**
 * The catalogue price of a purchase in US cents (integers, so amounts are
 * exact): annual = 10 monthly prices; founding_member and one-time add-ons
 * have one price whatever the period.
 */
export function purchaseUsdCents(purchase: Purchase): number {
  const monthly =
    purchase.kind === 'tier' ? tiers[purchase.key]?.usdPrice : addons[purchase.key]?.usdPrice
  if (monthly === undefined || monthly <= 0) {
    throw new ValidationException(`${purchase.key} cannot be bought`)
  }
  const cents = Math.round(monthly * 100)
  const multiplier =
    isPeriodic(purchase) && purchase.billingPeriod === 'annual' ? annualPriceMultiplier : 1
  return cents * multiplier
}

/** An exact positive rational read from a JS number ("142.1", "1.5e-7"). */
function toRational(value: number): { num: bigint; den: bigint } {
  const match = /^(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/.exec(String(value))
  if (!match || !(value > 0)) throw new RangeError(`not a positive price: ${value}`)
  const fraction = match[2] ?? ''
  const exponent = Number(match[3] ?? 0) - fraction.length
  const digits = BigInt(match[1] + fraction)
  return exponent >= 0
    ? { num: digits * 10n ** BigInt(exponent), den: 1n }
    : { num: digits, den: 10n ** BigInt(-exponent) }
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b
}

/**
 * Base units of a token worth `usdCents` at `usdPrice` dollars per whole
 * token, rounded up so the treasury never receives less than the price.
 */
export function baseUnitsForUsd(usdCents: number, usdPrice: number, decimals: number): bigint {
  const price = toRational(usdPrice)
  return ceilDiv(BigInt(usdCents) * 10n ** BigInt(decimals) * price.den, 100n * price.num)
}

/** The smallest amount accepted against an expected amount, with a tolerance in percent. */
export function withTolerance(expected: bigint, tolerancePercent: number): bigint {
  return (expected * BigInt(100 - tolerancePercent)) / 100n
}

/** Base units as a decimal string in whole tokens: 49226000n, 9 -> "0.049226". */
export function formatBaseUnits(amount: bigint, decimals: number): string {
  const negative = amount < 0n
  const digits = (negative ? -amount : amount).toString().padStart(decimals + 1, '0')
  const whole = digits.slice(0, digits.length - decimals)
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, '')
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`
}
