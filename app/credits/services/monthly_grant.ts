import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import { type TierKey, tierPlan } from '#config/plans'
import creditLedger, { type LedgerResult } from '#credits/services/credit_ledger'

/** The idempotency key of a user's monthly grant for one UTC month. */
export function monthlyGrantKey(userId: string, now: Date = new Date()): string {
  return `monthly:${userId}:${now.toISOString().slice(0, 7)}`
}

/**
 * Credits the tier's monthly AI Credits (config/plans.ts) for the current
 * UTC month, once: calling it again in the same month changes nothing
 * (`applied: false`). Returns null when the tier grants nothing.
 */
export async function grantMonthlyCredits(
  user: { id: string; effectiveTier: TierKey },
  options: { trx?: TransactionClientContract; now?: Date } = {}
): Promise<LedgerResult | null> {
  const plan = tierPlan(user.effectiveTier)
  if (plan.aiCreditsMonthly <= 0) return null
  const now = options.now ?? new Date()
  return creditLedger.credit(user.id, plan.aiCreditsMonthly, {
    kind: 'monthly',
    reason: `Monthly AI Credits (${plan.name}, ${now.toISOString().slice(0, 7)})`,
    idempotencyKey: monthlyGrantKey(user.id, now),
    metadata: { tier: plan.key, period: now.toISOString().slice(0, 7) },
    trx: options.trx,
  })
}
