import db from '@adonisjs/lucid/services/db'
import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import { type TierKey, tierPlan } from '#config/plans'
import creditLedger, { type LedgerResult } from '#credits/services/credit_ledger'

/** The idempotency key of a user's monthly grant for one UTC month. */
export function monthlyGrantKey(userId: string, now: Date = new Date()): string {
  return `monthly:${userId}:${now.toISOString().slice(0, 7)}`
}

/**
 * True when another account of the same mailbox (aliases folded:
 * `users.email_canonical`) was verified before this one. Disabled ones
 * count too, so a banned account's alias does not start afresh.
 */
export async function isLaterAliasAccount(
  userId: string,
  trx?: TransactionClientContract
): Promise<boolean> {
  const result = await (trx ?? db).rawQuery(
    `select 1 from users me
       join users other
         on other.email_canonical = me.email_canonical and other.id <> me.id
      where me.id = ?
        and other.email_verified_at is not null
        and (me.email_verified_at is null
             or other.email_verified_at < me.email_verified_at
             or (other.email_verified_at = me.email_verified_at and other.id < me.id))
      limit 1`,
    [userId]
  )
  return result.rows.length > 0
}

/**
 * Credits the tier's monthly AI Credits (config/plans.ts) for the current
 * UTC month, once: calling it again in the same month changes nothing
 * (`applied: false`). Returns null when the tier grants nothing, and for
 * the free tier's grant to an alias account (`alice+2@` after `alice@`):
 * the free allowance is one per mailbox; paid tiers are granted what they
 * paid for.
 */
export async function grantMonthlyCredits(
  user: { id: string; effectiveTier: TierKey },
  options: { trx?: TransactionClientContract; now?: Date } = {}
): Promise<LedgerResult | null> {
  const plan = tierPlan(user.effectiveTier)
  if (plan.aiCreditsMonthly <= 0) return null
  if (plan.key === 'free' && (await isLaterAliasAccount(user.id, options.trx))) return null
  const now = options.now ?? new Date()
  return creditLedger.credit(user.id, plan.aiCreditsMonthly, {
    kind: 'monthly',
    reason: `Monthly AI Credits (${plan.name}, ${now.toISOString().slice(0, 7)})`,
    idempotencyKey: monthlyGrantKey(user.id, now),
    metadata: { tier: plan.key, period: now.toISOString().slice(0, 7) },
    trx: options.trx,
  })
}
