import db from '@adonisjs/lucid/services/db'
import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import CreditLedgerEntry, { type LedgerKind } from '#credits/models/credit_ledger_entry'
import { authCache } from '#identity/services/auth_cache'
import {
  InsufficientCreditsException,
  NotFoundException,
  ValidationException,
} from '#core/exceptions/api_exceptions'

export type { LedgerKind }

export interface LedgerOptions {
  kind: LedgerKind
  reason?: string | null
  /** The person who caused the change (admin of a grant), if any. */
  actorId?: string | null
  /** `llm` entries: which upstream and model, and the tokens billed. */
  provider?: string | null
  model?: string | null
  inputTokens?: number | null
  outputTokens?: number | null
  metadata?: Record<string, unknown> | null
  /**
   * A change that must happen once (a period's monthly grant, a reward, a
   * purchase): a second call with the same key changes nothing and returns
   * the first entry with `applied: false`.
   */
  idempotencyKey?: string | null
  /** Run inside the caller's transaction (committed or rolled back with it). */
  trx?: TransactionClientContract
}

export interface LedgerResult {
  entry: CreditLedgerEntry
  /** The balance after this change. */
  balance: number
  /** False when the idempotency key had been used already. */
  applied: boolean
}

const PG_NUMERIC_OUT_OF_RANGE = '22003'

/** The ledger holds no zero-credit entries (a free call is not a debit). */
function assertAmount(credits: number) {
  if (!Number.isSafeInteger(credits) || credits <= 0) {
    throw new ValidationException('credits must be a positive integer')
  }
}

async function inTransaction<T>(
  trx: TransactionClientContract | undefined,
  work: (trx: TransactionClientContract) => Promise<T>
): Promise<T> {
  return trx ? work(trx) : db.transaction(work)
}

async function alreadyApplied(
  trx: TransactionClientContract,
  idempotencyKey: string | null | undefined
): Promise<LedgerResult | null> {
  if (!idempotencyKey) return null
  // Same-key callers queue here until the first one's transaction ends.
  await trx.rawQuery('select pg_advisory_xact_lock(hashtext(?))', [`ledger:${idempotencyKey}`])
  const existing = await CreditLedgerEntry.query({ client: trx })
    .where('idempotency_key', idempotencyKey)
    .first()
  return existing ? { entry: existing, balance: existing.balanceAfter, applied: false } : null
}

async function record(
  trx: TransactionClientContract,
  userId: string,
  signedCredits: number,
  balance: number,
  options: LedgerOptions
): Promise<LedgerResult> {
  const entry = await CreditLedgerEntry.create(
    {
      userId,
      kind: options.kind,
      credits: signedCredits,
      balanceAfter: balance,
      reason: options.reason ?? null,
      actorId: options.actorId ?? null,
      provider: options.provider ?? null,
      model: options.model ?? null,
      inputTokens: options.inputTokens ?? null,
      outputTokens: options.outputTokens ?? null,
      metadata: options.metadata ?? null,
      idempotencyKey: options.idempotencyKey ?? null,
    },
    { client: trx }
  )
  return { entry, balance, applied: true }
}

/**
 * Adds credits to a user's balance and writes the ledger entry, in one
 * transaction (the caller's when `trx` is given).
 */
export async function credit(
  userId: string,
  credits: number,
  options: LedgerOptions
): Promise<LedgerResult> {
  assertAmount(credits)
  return inTransaction(options.trx, async (trx) => {
    const done = await alreadyApplied(trx, options.idempotencyKey)
    if (done) return done

    let rows: { ai_credits_balance: number }[]
    try {
      rows = await trx
        .from('users')
        .where('id', userId)
        .increment('ai_credits_balance', credits)
        .returning('ai_credits_balance')
    } catch (error) {
      if ((error as { code?: string }).code === PG_NUMERIC_OUT_OF_RANGE) {
        throw new ValidationException('The balance would exceed the largest allowed value')
      }
      throw error
    }
    if (rows.length === 0) throw new NotFoundException('User not found')
    authCache.forgetUser(userId, trx)
    return record(trx, userId, credits, rows[0].ai_credits_balance, options)
  })
}

/**
 * Takes credits from a user's balance and writes the (negative) ledger
 * entry, in one transaction. The balance update only matches while the
 * balance covers the amount, so concurrent debits can never overspend;
 * otherwise InsufficientCreditsException (402). A debit is at least 1
 * credit: usage that costs nothing is not recorded.
 */
export async function debit(
  userId: string,
  credits: number,
  options: LedgerOptions
): Promise<LedgerResult> {
  assertAmount(credits)
  return inTransaction(options.trx, async (trx) => {
    const done = await alreadyApplied(trx, options.idempotencyKey)
    if (done) return done

    const rows: { ai_credits_balance: number }[] = await trx
      .from('users')
      .where('id', userId)
      .where('ai_credits_balance', '>=', credits)
      .decrement('ai_credits_balance', credits)
      .returning('ai_credits_balance')
    if (rows.length === 0) {
      const exists = await trx.from('users').where('id', userId).select('id').first()
      if (!exists) throw new NotFoundException('User not found')
      throw new InsufficientCreditsException()
    }
    authCache.forgetUser(userId, trx)
    return record(trx, userId, -credits, rows[0].ai_credits_balance, options)
  })
}

/** The current balance (0 for an unknown user). */
export async function balanceOf(userId: string): Promise<number> {
  const row = await db.from('users').where('id', userId).select('ai_credits_balance').first()
  return row?.ai_credits_balance ?? 0
}

/** Newest entries first. */
export async function entriesOf(userId: string, limit: number): Promise<CreditLedgerEntry[]> {
  return CreditLedgerEntry.query().where('user_id', userId).orderBy('seq', 'desc').limit(limit)
}

/**
 * Usage: every debit (spending, `credits` < 0), newest first; grants,
 * purchases, rewards and refunds are not usage.
 */
export async function debitsOf(userId: string, limit: number): Promise<CreditLedgerEntry[]> {
  return CreditLedgerEntry.query()
    .where('user_id', userId)
    .where('credits', '<', 0)
    .orderBy('seq', 'desc')
    .limit(limit)
}

/** Credits spent on hosted model requests (`llm` entries) since `since`, as a positive number. */
export async function llmCreditsSpentSince(since: Date): Promise<number> {
  const row = await db
    .from('credit_ledger')
    .where('kind', 'llm')
    .where('created_at', '>=', since)
    .sum('credits as spent')
    .first()
  return Math.abs(Number(row?.spent ?? 0))
}

const creditLedger = { credit, debit, balanceOf, entriesOf, debitsOf }
export default creditLedger
