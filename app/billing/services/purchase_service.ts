import { DateTime } from 'luxon'
import db from '@adonisjs/lucid/services/db'
import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import {
  addons,
  foundingMemberSlots,
  tierPlan,
  tiers,
  type AddonKey,
  type BillingPeriod,
  type TierKey,
} from '#config/plans'
import { ValidationException } from '#core/exceptions/api_exceptions'
import User from '#identity/models/user'
import { notify } from '#identity/services/notification_service'
import creditLedger from '#credits/services/credit_ledger'
import { grantMonthlyCredits } from '#credits/services/monthly_grant'
import type Payment from '#billing/models/payment'
import AddonSubscription from '#billing/models/addon_subscription'
import { verifyPayment } from '#billing/services/payment_verifier'
import { recordVerifiedPayment } from '#billing/services/payment_recorder'
import { createQuote, type QuoteView } from '#billing/services/quote_service'
import { describePurchase, type PaymentToken, type Purchase } from '#billing/services/pricing'
import {
  claimFoundingSlot,
  foundingSlotsTaken,
  SOLD_OUT_MESSAGE,
} from '#billing/services/founding_slots'
import {
  activeAddonsOf,
  agentLimitFor,
  presentAddon,
  type ActiveAddonView,
} from '#billing/services/agent_limits'
import { enforceAgentLimitQuietly } from '#billing/services/agent_limit_enforcer'
import { presentPayment, type PaymentView } from '#billing/services/payment_view'

/**
 * Buying plans: POST /features/quote, /features/subscribe, /features/addon.
 * A purchase is verified on chain first (nothing changes while that runs),
 * then recorded and activated in ONE database transaction that starts with
 * the payment row, whose unique signature makes a replayed or concurrently
 * resubmitted transaction activate at most once. Any refusal rolls the whole
 * transaction back: a refused payment changes nothing.
 */

export interface PaymentRequest {
  txSignature: string
  paymentToken?: PaymentToken
  billingPeriod?: BillingPeriod
}

export interface SubscribeResult {
  tier: TierKey
  billingPeriod: BillingPeriod | 'lifetime'
  subscriptionExpiresAt: string | null
  /** The Founding Member slot number bought (1 to 20), else null. */
  foundingSlot: number | null
  agentLimit: number
  aiCreditsBalance: number
  payment: PaymentView
}

export interface AddonResult {
  addon: {
    key: AddonKey
    name: string
    type: 'subscription' | 'one_time'
    extraAgents: number
    aiCredits: number
    /** Subscription packs: when the extra agents end; null for one-time packs. */
    expiresAt: string | null
  }
  activeAddons: ActiveAddonView[]
  agentLimit: number
  aiCreditsBalance: number
  payment: PaymentView
}

function monthsOf(period: BillingPeriod): number {
  return period === 'annual' ? 12 : 1
}

/**
 * Refuses purchases that cannot be activated for this account, before any
 * chain lookup (and again under lock, inside the activation).
 */
async function assertTierPurchasable(account: User, tier: TierKey, checkSlots: boolean) {
  if (tier === 'free') throw new ValidationException('The free tier cannot be bought')
  const current = account.effectiveTier
  if (tierPlan(current).lifetime) {
    throw new ValidationException(
      current === tier
        ? `You are already a ${tierPlan(current).name}; it never expires`
        : `You hold the lifetime ${tierPlan(current).name} tier, which already includes more than ${tiers[tier].name}`
    )
  }
  if (checkSlots && tiers[tier].lifetime && (await foundingSlotsTaken()) >= foundingMemberSlots) {
    throw new ValidationException(SOLD_OUT_MESSAGE)
  }
}

/**
 * The new expiry of a periodic tier: renewing the tier in effect extends it
 * from its current expiry; switching from another paid tier starts now and
 * keeps the unused time of the old tier, converted at the price ratio.
 */
export function nextExpiry(
  account: Pick<User, 'effectiveTier' | 'subscriptionExpiresAt'>,
  tier: TierKey,
  period: BillingPeriod,
  now: DateTime
): DateTime {
  const months = monthsOf(period)
  const current = account.effectiveTier
  const expiry = account.subscriptionExpiresAt
  const unused = expiry && expiry > now && current !== 'free' ? expiry : null
  if (unused && current === tier) return unused.plus({ months })
  let end = now.plus({ months })
  if (unused && !tierPlan(current).lifetime) {
    const carried =
      unused.diff(now).as('milliseconds') * (tierPlan(current).usdPrice / tiers[tier].usdPrice)
    end = end.plus({ milliseconds: Math.floor(carried) })
  }
  return end
}

/**
 * The new tier's monthly AI Credits for this month: the regular monthly grant
 * when none was given yet this month, else a top-up to the new tier's amount.
 */
async function grantTierCredits(trx: TransactionClientContract, account: User, now: DateTime) {
  const first = await grantMonthlyCredits(account, { trx, now: now.toJSDate() })
  if (!first || first.applied) return
  const period = now.toUTC().toISO()!.slice(0, 7)
  const row = await trx
    .from('credit_ledger')
    .where('user_id', account.id)
    .where('kind', 'monthly')
    .whereRaw(`metadata->>'period' = ?`, [period])
    .sum('credits as total')
    .first()
  const plan = tierPlan(account.effectiveTier)
  const missing = plan.aiCreditsMonthly - Number(row?.total ?? 0)
  if (missing <= 0) return
  await creditLedger.credit(account.id, missing, {
    kind: 'monthly',
    reason: `Monthly AI Credits top-up to ${plan.name} (${period})`,
    idempotencyKey: `monthly-topup:${account.id}:${period}:${plan.key}`,
    metadata: { tier: plan.key, period, topUp: true },
    trx,
  })
}

async function lockAccount(trx: TransactionClientContract, userId: string): Promise<User> {
  return User.query({ client: trx }).where('id', userId).forUpdate().firstOrFail()
}

/** Verifies the payment, then records it and runs `activate` in one transaction. */
async function payAndActivate<T>(
  user: User,
  purchase: Purchase,
  request: PaymentRequest,
  activate: (trx: TransactionClientContract, account: User, payment: Payment) => Promise<T>
): Promise<{ payment: Payment; result: T; account: User }> {
  const verified = await verifyPayment({
    signature: request.txSignature,
    userId: user.id,
    linkedWallet: user.walletAddress,
    token: request.paymentToken ?? 'sol',
    purchase,
  })
  return db.transaction(async (trx) => {
    const payment = await recordVerifiedPayment(trx, verified)
    const account = await lockAccount(trx, user.id)
    const result = await activate(trx, account, payment)
    return { payment, result, account }
  })
}

/** POST /features/subscribe. */
export async function subscribe(
  user: User,
  input: PaymentRequest & { tier: TierKey }
): Promise<SubscribeResult> {
  const plan = tiers[input.tier]
  const period: BillingPeriod = input.billingPeriod ?? 'monthly'
  await assertTierPurchasable(user, input.tier, true)
  const purchase: Purchase = { kind: 'tier', key: input.tier, billingPeriod: period }

  const {
    payment,
    result: foundingSlot,
    account,
  } = await payAndActivate(user, purchase, input, async (trx, locked, paid) => {
    await assertTierPurchasable(locked, input.tier, false)
    const now = DateTime.utc()
    const renewed = locked.effectiveTier === input.tier
    let slot: number | null = null
    if (plan.lifetime) {
      slot = await claimFoundingSlot(trx, { userId: locked.id, paymentId: paid.id })
      locked.subscriptionExpiresAt = null
    } else {
      locked.subscriptionExpiresAt = nextExpiry(locked, input.tier, period, now)
    }
    locked.tier = input.tier
    await locked.useTransaction(trx).save()
    await grantTierCredits(trx, locked, now)
    await notify(
      locked.id,
      {
        type: 'subscription_activated',
        title: `${plan.name} ${renewed ? 'renewed' : 'activated'}`,
        body: plan.lifetime
          ? `Payment received (${paid.usdValue} USD). You are Founding Member #${slot}: your plan never expires.`
          : `Payment received (${paid.usdValue} USD) for ${describePurchase(purchase)}. Your plan runs until ${locked.subscriptionExpiresAt!.toUTC().toISO()}.`,
      },
      { trx }
    )
    return slot
  })

  await enforceAgentLimitQuietly(account.id, { limitChanged: true })
  const fresh = await User.findOrFail(account.id)
  return {
    tier: fresh.tier,
    billingPeriod: plan.lifetime ? 'lifetime' : period,
    subscriptionExpiresAt: fresh.subscriptionExpiresAt?.toUTC().toISO() ?? null,
    foundingSlot,
    agentLimit: await agentLimitFor(fresh),
    aiCreditsBalance: fresh.aiCreditsBalance,
    payment: presentPayment(payment),
  }
}

/** POST /features/addon. */
export async function purchaseAddon(
  user: User,
  input: PaymentRequest & { addonKey: AddonKey }
): Promise<AddonResult> {
  const addon = addons[input.addonKey]
  const period: BillingPeriod = input.billingPeriod ?? 'monthly'
  const purchase: Purchase = { kind: 'addon', key: input.addonKey, billingPeriod: period }

  const { payment, result: pack } = await payAndActivate(
    user,
    purchase,
    input,
    async (trx, locked, paid) => {
      const now = DateTime.utc()
      let row: AddonSubscription | null = null
      if (addon.extraAgents > 0) {
        // Each pack stands alone: packs bought together add up.
        row = await AddonSubscription.create(
          {
            userId: locked.id,
            addonKey: addon.key,
            extraAgents: addon.extraAgents,
            paymentId: paid.id,
            startsAt: now,
            expiresAt: now.plus({
              months: addon.durationMonths * (addon.type === 'subscription' ? monthsOf(period) : 1),
            }),
          },
          { client: trx }
        )
      }
      if (addon.aiCredits > 0) {
        await creditLedger.credit(locked.id, addon.aiCredits, {
          kind: 'purchase',
          reason: `${addon.name} (payment ${paid.signature})`,
          idempotencyKey: `purchase:${paid.signature}`,
          metadata: { paymentId: paid.id, addonKey: addon.key },
          trx,
        })
      }
      await notify(
        locked.id,
        {
          type: 'addon_purchased',
          title: `${addon.name} added`,
          body: row
            ? `Payment received (${paid.usdValue} USD). ${addon.extraAgents} more agents until ${row.expiresAt.toUTC().toISO()}.`
            : `Payment received (${paid.usdValue} USD). ${addon.aiCredits} AI Credits were added to your balance.`,
        },
        { trx }
      )
      return row
    }
  )

  if (pack) await enforceAgentLimitQuietly(user.id, { limitChanged: true })
  const fresh = await User.findOrFail(user.id)
  const active = await activeAddonsOf(fresh.id)
  return {
    addon: {
      key: addon.key,
      name: addon.name,
      type: addon.type,
      extraAgents: addon.extraAgents,
      aiCredits: addon.aiCredits,
      expiresAt: pack ? pack.expiresAt.toUTC().toISO() : null,
    },
    activeAddons: active.map(presentAddon),
    agentLimit: await agentLimitFor(fresh),
    aiCreditsBalance: fresh.aiCreditsBalance,
    payment: presentPayment(payment),
  }
}

/** POST /features/quote: an exact amount for a tier or an add-on. */
export async function quotePurchase(
  user: User,
  input: {
    tier?: TierKey
    addonKey?: AddonKey
    paymentToken?: PaymentToken
    billingPeriod?: BillingPeriod
  }
): Promise<QuoteView> {
  if ((input.tier === undefined) === (input.addonKey === undefined)) {
    throw new ValidationException('Give exactly one of tier or addonKey')
  }
  const billingPeriod = input.billingPeriod ?? 'monthly'
  let purchase: Purchase
  if (input.tier !== undefined) {
    await assertTierPurchasable(user, input.tier, true)
    purchase = { kind: 'tier', key: input.tier, billingPeriod }
  } else {
    purchase = { kind: 'addon', key: input.addonKey!, billingPeriod }
  }
  return createQuote({ userId: user.id, purchase, token: input.paymentToken ?? 'sol' })
}
