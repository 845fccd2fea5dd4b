import vine from '@vinejs/vine'
import { addons, tierOrder } from '#config/plans'
import { paymentTokens } from '#billing/services/pricing'

/** Tiers that can be bought (free is what you have without paying). */
const buyableTiers = tierOrder.filter((key) => key !== 'free')
const addonKeys = Object.keys(addons) as (keyof typeof addons)[]

const txSignature = () => vine.string().trim().minLength(64).maxLength(128)
const paymentToken = () => vine.enum(paymentTokens).optional()
const billingPeriod = () => vine.enum(['monthly', 'annual'] as const).optional()

export const subscribeValidator = vine.create({
  tier: vine.enum(buyableTiers),
  txSignature: txSignature(),
  paymentToken: paymentToken(),
  billingPeriod: billingPeriod(),
  /** Client hint only: the server recomputes the expected amount. */
  solAmount: vine.number().optional(),
})

export const addonValidator = vine.create({
  addonKey: vine.enum(addonKeys),
  txSignature: txSignature(),
  paymentToken: paymentToken(),
  billingPeriod: billingPeriod(),
})

export const quoteValidator = vine.create({
  tier: vine.enum(buyableTiers).optional(),
  addonKey: vine.enum(addonKeys).optional(),
  paymentToken: paymentToken(),
  billingPeriod: billingPeriod(),
})

export const walletLinkValidator = vine.create({
  address: vine.string().trim().minLength(32).maxLength(44),
  signature: vine.string().trim().minLength(64).maxLength(200),
})
