import { randomUUID } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import { RateLimitExceededException } from '#core/exceptions/api_exceptions'
import { nextUtcMidnight } from '#identity/services/quota_service'

/** Tables whose rows per account and UTC day are a daily allowance (token scans, research). */
export type AllowanceTable = 'token_scans' | 'research_tasks'

/**
 * Takes one of today's `limit` uses of a tool for an account by inserting
 * its row, under a per-account advisory lock so concurrent requests (on any
 * instance) cannot pass the limit together. 429 RATE_LIMIT_EXCEEDED when
 * the day's uses are gone (with the reset time). Returns the row's id; a
 * use that then fails is given back with `releaseDailyUse`.
 */
export async function takeDailyUse(
  table: AllowanceTable,
  userId: string,
  limit: number,
  row: Record<string, unknown>,
  what: string
): Promise<string> {
  const now = new Date()
  const resetAt = nextUtcMidnight(now)
  const dayStart = new Date(resetAt.getTime() - 86_400_000)
  const id = randomUUID()
  await db.transaction(async (trx) => {
    await trx.rawQuery('select pg_advisory_xact_lock(hashtext(?))', [`${table}:${userId}`])
    const counted = await trx
      .from(table)
      .where('user_id', userId)
      .where('created_at', '>=', dayStart)
      .count('* as total')
    if (Number(counted[0].total) >= limit) {
      throw new RateLimitExceededException(
        `Daily limit reached: ${limit} ${what} per day; it resets at ${resetAt.toISOString()}`
      )
    }
    await trx
      .insertQuery()
      .table(table)
      .insert({ id, user_id: userId, created_at: now, ...row })
  })
  return id
}

/** Gives a use back (the tool failed before answering). */
export async function releaseDailyUse(table: AllowanceTable, id: string): Promise<void> {
  await db.from(table).where('id', id).delete()
}

/**
 * Runs a tool as one of today's uses: takes the use (429 when none is
 * left), runs `work` with the row's id, and gives the use back when it fails.
 */
export async function withDailyUse<T>(
  allowance: {
    table: AllowanceTable
    userId: string
    limit: number
    row: Record<string, unknown>
    what: string
  },
  work: (useId: string) => Promise<T>
): Promise<T> {
  const { table, userId, limit, row, what } = allowance
  const useId = await takeDailyUse(table, userId, limit, row, what)
  try {
    return await work(useId)
  } catch (error) {
    await releaseDailyUse(table, useId)
    throw error
  }
}
