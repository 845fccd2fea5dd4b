import { tierPlan } from '#config/plans'
import { NotFoundException } from '#core/exceptions/api_exceptions'
import CreditLedgerEntry from '#credits/models/credit_ledger_entry'
import { isLaterAliasAccount } from '#credits/services/monthly_grant'
import creditLedger from '#credits/services/credit_ledger'
import User from '#identity/models/user'
import { notify } from '#identity/services/notification_service'
import db from '@adonisjs/lucid/services/db'

export interface UsageEntryView {
  id: string
  kind: string
  provider: string | null
  model: string | null
  /** What the entry cost: positive (the history lists debits only, CONTRACT.md). */
  credits: number
  inputTokens: number
  outputTokens: number
  reason: string | null
  createdAt: string
}

export function presentEntry(entry: CreditLedgerEntry): UsageEntryView {
  return {
    id: entry.id,
    kind: entry.kind,
    provider: entry.provider,
    model: entry.model,
    credits: Math.abs(entry.credits),
    inputTokens: entry.inputTokens ?? 0,
    outputTokens: entry.outputTokens ?? 0,
    reason: entry.reason,
    createdAt: entry.createdAt.toUTC().toISO()!,
  }
}

/** GET /ai-credits/balance. */
export async function balanceView(user: User) {
  const tier = user.effectiveTier
  // The free allowance is one per mailbox (grantMonthlyCredits): an alias account's is 0.
  const alias = tier === 'free' && (await isLaterAliasAccount(user.id))
  return {
    balance: await creditLedger.balanceOf(user.id),
    monthlyGrant: alias ? 0 : tierPlan(tier).aiCreditsMonthly,
    tier,
  }
}

/** GET /ai-credits/history: usage only (debits), newest first, `credits` positive. */
export async function historyView(user: User, limit: number) {
  const entries = await creditLedger.debitsOf(user.id, limit)
  return { usage: entries.map(presentEntry) }
}

/**
 * POST /ai-credits/grant and the console's grant, for an admin the caller
 * authorized (AccountPolicy.grantCredits). The ledger entry names the admin
 * (actor) and the reason; the user is notified in the same transaction.
 */
export async function grantCredits(
  admin: User,
  input: { userId: string; credits: number; reason: string }
) {
  const target = await User.find(input.userId)
  if (!target) throw new NotFoundException('User not found')

  const result = await db.transaction(async (trx) => {
    const done = await creditLedger.credit(target.id, input.credits, {
      kind: 'grant',
      reason: input.reason,
      actorId: admin.id,
      trx,
    })
    await notify(
      target.id,
      {
        type: 'ai_credits_granted',
        title: `${input.credits} AI Credits added`,
        body: input.reason,
      },
      { trx }
    )
    return done
  })

  return {
    id: result.entry.id,
    userId: target.id,
    credits: input.credits,
    reason: input.reason,
    grantedBy: admin.id,
    balance: result.balance,
    createdAt: result.entry.createdAt.toUTC().toISO(),
  }
}

/** The `credit_ledger` section of the data export: every entry of the account, oldest first. */
export async function creditLedgerForExport(userId: string) {
  const rows = await CreditLedgerEntry.query().where('user_id', userId).orderBy('seq', 'asc')
  return rows.map((row) => ({
    id: row.id,
    kind: row.kind,
    credits: row.credits,
    balanceAfter: row.balanceAfter,
    reason: row.reason,
    actorId: row.actorId,
    provider: row.provider,
    model: row.model,
    inputTokens: row.inputTokens,
    outputTokens: row.outputTokens,
    metadata: row.metadata,
    createdAt: row.createdAt.toUTC().toISO(),
  }))
}
