import { DateTime } from 'luxon'
import { column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'

/**
 * Kinds of balance change. Credits: `grant` (by an admin), `monthly` (tier
 * grant), `purchase` (credit pack), `referral` (reward), `refund`.
 * Debits: `llm` (hosted model usage). `adjustment` is either.
 */
export type LedgerKind =
  'grant' | 'monthly' | 'purchase' | 'referral' | 'refund' | 'llm' | 'adjustment'

/** One signed change of a user's AI Credit balance (+ credit, - debit). */
export default class CreditLedgerEntry extends UuidModel {
  static table = 'credit_ledger'

  @column()
  declare userId: string

  @column()
  declare kind: LedgerKind

  /** Signed: positive for a credit, negative for a debit. */
  @column()
  declare credits: number

  @column()
  declare balanceAfter: number

  @column()
  declare reason: string | null

  /** Who caused the change when it was a person (the admin of a grant). */
  @column()
  declare actorId: string | null

  @column()
  declare provider: string | null

  @column()
  declare model: string | null

  @column()
  declare inputTokens: number | null

  @column()
  declare outputTokens: number | null

  @column()
  declare metadata: Record<string, unknown> | null

  @column()
  declare idempotencyKey: string | null

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime
}
