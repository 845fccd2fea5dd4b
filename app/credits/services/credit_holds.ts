import { randomUUID } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import logger from '@adonisjs/core/services/logger'
import { modelProxyConfig } from '#config/model_proxy'
import creditLedger from '#credits/services/credit_ledger'
import { InsufficientCreditsException } from '#core/exceptions/api_exceptions'
import { authCache } from '#identity/services/auth_cache'
import { preparedQuery } from '#core/database/prepared_query'
import { INSTANCE_ID, deadHoldersIn } from '#core/jobs/instance'
import type { PeriodicJob } from '#core/jobs/periodic_jobs'
import type { TokenUsage } from '#core/openai/wire'
import {
  AGENT_BUDGET_SQL,
  alertReachedThresholds,
  assertWithinBudgets,
  budgetContext,
  type BudgetContext,
} from '#credits/services/credit_budgets'

/**
 * Credit holds for hosted model requests (see the chat_credit_holds
 * migration). `reserve` takes the estimated cost from the balance with a
 * guarded UPDATE (one statement: concurrent requests can never take the
 * balance below zero, and a balance of 0 refuses even a free request, as
 * CONTRACT.md says); `settle` returns the hold and debits the real cost
 * in one atomic step, so every paid hosted request leaves exactly one
 * `llm` ledger entry (a free one leaves none: the ledger holds no
 * zero-credit debits).
 *
 * They live in the credits area, next to the ledger, because they write the
 * balance and the ledger: no other area writes `ai_credits_balance` or
 * `credit_ledger` (the model proxy in chat calls these).
 */
export interface CreditHold {
  id: string
  userId: string
  credits: number
  /** The budgets the hold was checked against; their alerts are checked after the charge. */
  budget?: BudgetContext
}

export interface ReserveOptions {
  /** The agent the call is for: its budget applies, and its holds count against it. */
  agentId?: string | null
  /** The clock of the budget month (tests). */
  now?: Date
}

export interface Charge {
  provider: string
  model: string
  /** The tokens billed. */
  usage: TokenUsage
  credits: number
  metadata?: Record<string, unknown>
}

export async function reserveCredits(
  userId: string,
  credits: number,
  options: ReserveOptions = {}
): Promise<CreditHold> {
  const id = randomUUID()
  const agentId = options.agentId ?? null
  // The hold commits without waiting for its WAL flush (synchronous_commit
  // off for this one transaction: one fsync less before the upstream call).
  // Visibility and row locks are unchanged, so concurrent holds still never
  // overspend. Durability is kept where it matters: the settlement (or the
  // release) commits synchronously, and flushing its WAL flushes this
  // earlier record too. A hold lost to a database crash before any later
  // flush had given the credits back, exactly like an expired hold.
  // The same statement reads the account's and the agent's monthly budgets:
  // without either (the usual case) the hold costs no more round trips.
  const result = await preparedQuery<{
    balance: number
    txid: string
    account_budget: number | null
    agent_budget: number | null
  }>(
    'credits.reserve_hold',
    `with relaxed as materialized (
       select set_config('synchronous_commit', 'off', true) as setting),
     taken as (
       update users set ai_credits_balance = ai_credits_balance - $3
        where id = $2 and ai_credits_balance >= greatest($3, 1)
          and (select setting from relaxed) is not null
        returning id, ai_credits_balance, ai_credits_monthly_budget),
     held as (
       insert into chat_credit_holds (id, user_id, agent_id, credits, holder, created_at, expires_at)
       select $1, id, $6, $3, $4, now(), now() + ($5 || ' milliseconds')::interval
         from taken
       returning id)
     select taken.ai_credits_balance as balance, txid_current()::text as txid,
            taken.ai_credits_monthly_budget as account_budget,
            (select ${AGENT_BUDGET_SQL} from agents a where a.id = $6 and a.user_id = $2)
              as agent_budget
       from held cross join taken`,
    [id, userId, credits, INSTANCE_ID, String(modelProxyConfig.holdTtlMs), agentId]
  )
  if (result.rows.length === 0) throw new InsufficientCreditsException()
  const row = result.rows[0]
  if (credits > 0) authCache.balanceChanged(userId, row.balance, row.txid)
  const hold: CreditHold = { id, userId, credits }
  const budget = budgetContext(userId, agentId, row.agent_budget, row.account_budget)
  if (budget) {
    hold.budget = budget
    try {
      await assertWithinBudgets(budget, hold, options.now)
    } catch (error) {
      await releaseHold(hold)
      throw error
    }
  }
  return hold
}

/**
 * Whether a hold of `credits` for the account is all but sure to be taken:
 * its balance as this instance last saw it (the auth cache, kept current by
 * the balance announcements) covers it twice over and it has no monthly
 * budget. A hint only: the hold itself decides.
 */
function holdAllButSure(userId: string, credits: number): boolean {
  const row = authCache.user(userId)
  if (!row || row.ai_credits_monthly_budget !== null) return false
  return Number(row.ai_credits_balance) >= 2 * Math.max(credits, 1)
}

/** Per account, the holds being taken on this instance, and the one taken alone if any. */
const holdsUnderWay = new Map<string, { count: number; alone?: Promise<unknown> }>()

/**
 * Takes an account's hold (`take`) in this instance's turn for the account.
 * `take` is told whether the hold is all but sure: only when `allowed`, no
 * other hold of the account is under way here and holdAllButSure says so;
 * that hold then goes alone (the account's other holds here wait for it),
 * so nothing this instance does takes the credits it counted on. The model
 * proxy asks its upstream alongside such a hold (heldCall): the provider
 * sees a request that is then refused only when another instance spent the
 * balance at that moment.
 */
export async function holdInTurn<T>(
  userId: string,
  credits: number,
  allowed: boolean,
  take: (allButSure: boolean) => Promise<T>
): Promise<T> {
  let state = holdsUnderWay.get(userId)
  while (state?.alone) {
    await state.alone.catch(() => {})
    state = holdsUnderWay.get(userId)
  }
  if (!state) holdsUnderWay.set(userId, (state = { count: 0 }))
  const alone = allowed && state.count === 0 && holdAllButSure(userId, credits)
  state.count++
  const taken = take(alone)
  if (alone) state.alone = taken
  try {
    return await taken
  } finally {
    if (alone) state.alone = undefined
    if (--state.count === 0) holdsUnderWay.delete(userId)
  }
}

/**
 * Returns the hold and debits `charge.credits` (at most what the balance
 * then holds: a reply longer than its hold never takes the balance below
 * zero; the shortfall is noted in the entry's metadata). Returns the
 * credits actually debited.
 *
 * The usual case (the balance plus the hold covers the cost) is one
 * statement - one round trip and one commit on the hot path of every hosted
 * request - with the ledger's own invariants: a guarded UPDATE of the
 * balance and one `llm` entry carrying `balance_after`. The hold row is
 * locked first, so the expiry job (which skips locked holds) can never
 * return it twice. Otherwise the clamped debit goes through the ledger
 * service in a transaction.
 */
export async function settleHold(hold: CreditHold, charge: Charge): Promise<number> {
  const debited = await settleCharge(hold, charge)
  // Only a charge moves spending towards a budget's 80 % and 100 %.
  if (hold.budget && debited > 0) await alertReachedThresholds(hold.budget)
  return debited
}

async function settleCharge(hold: CreditHold, charge: Charge): Promise<number> {
  // A call that cost nothing (the free local-dev model) is not a debit: no ledger entry.
  if (charge.credits <= 0) {
    await releaseHold(hold)
    return 0
  }
  const result = await preparedQuery<{ balance_after: number; txid: string }>(
    'credits.settle_hold',
    `with hold as (
       select credits from chat_credit_holds where id = $1 for update),
     charged as (
       update users
          set ai_credits_balance = ai_credits_balance + coalesce((select credits from hold), 0) - $3
        where id = $2
          and ai_credits_balance + coalesce((select credits from hold), 0) >= $3
        returning ai_credits_balance),
     released as (
       delete from chat_credit_holds where id = $1 and exists (select 1 from charged)
       returning 1),
     entry as (
       insert into credit_ledger (id, user_id, kind, credits, balance_after, provider, model,
                                  input_tokens, output_tokens, metadata, created_at)
       select cast($4 as uuid), cast($2 as uuid), 'llm', -cast($3 as integer),
              ai_credits_balance, $5, $6, $7, $8,
              cast($9 as jsonb), now()
         from charged
       returning balance_after)
     select (select count(*) from released) as released, balance_after,
            txid_current()::text as txid
       from entry`,
    [
      hold.id,
      hold.userId,
      charge.credits,
      randomUUID(),
      charge.provider,
      charge.model,
      charge.usage.inputTokens,
      charge.usage.outputTokens,
      charge.metadata ? JSON.stringify(charge.metadata) : null,
    ]
  )
  if (result.rows.length > 0) {
    const row = result.rows[0]
    authCache.balanceChanged(hold.userId, row.balance_after, row.txid)
    return charge.credits
  }
  return settleClamped(hold, charge)
}

/** The cost exceeds the balance plus the hold: debit what there is, through the ledger. */
async function settleClamped(hold: CreditHold, charge: Charge): Promise<number> {
  return db.transaction(async (trx) => {
    const balanceRow = await trx.rawQuery(
      `with released as (delete from chat_credit_holds where id = :holdId returning credits)
       update users set ai_credits_balance =
              ai_credits_balance + coalesce((select credits from released), 0)
        where id = :userId returning ai_credits_balance`,
      { holdId: hold.id, userId: hold.userId }
    )
    if (balanceRow.rows.length === 0) return 0
    const balance: number = balanceRow.rows[0].ai_credits_balance
    const credits = Math.min(charge.credits, balance)
    if (credits <= 0) return 0
    await creditLedger.debit(hold.userId, credits, {
      kind: 'llm',
      provider: charge.provider,
      model: charge.model,
      inputTokens: charge.usage.inputTokens,
      outputTokens: charge.usage.outputTokens,
      metadata: { ...charge.metadata, uncoveredCredits: charge.credits - credits },
      trx,
    })
    return credits
  })
}

/** Returns a hold without charging (the request never reached the model). */
export async function releaseHold(hold: CreditHold): Promise<void> {
  await db.transaction(async (trx) => {
    const released = await trx.rawQuery(
      'delete from chat_credit_holds where id = ? returning credits',
      [hold.id]
    )
    const held: number = released.rows[0]?.credits ?? 0
    if (held > 0) {
      await trx.rawQuery(
        'update users set ai_credits_balance = ai_credits_balance + ? where id = ?',
        [held, hold.userId]
      )
      authCache.forgetUser(hold.userId, trx)
    }
  })
}

/**
 * Job: returns holds whose request never settled: expired ones, and at once
 * those of an instance that provably died mid-request (on this host, its
 * pid gone; see holderIsGone). Runs shortly after every start too, so a
 * service killed with -9 gives its held credits back when it comes up.
 */
export async function releaseExpiredHolds(now = new Date()): Promise<number> {
  const deadHolders = await deadHoldersIn('chat_credit_holds', 'holder')
  let total = 0
  for (;;) {
    const batch = await db.transaction(async (trx) => {
      const rows = await trx.rawQuery(
        `delete from chat_credit_holds where id in (
           select id from chat_credit_holds
            where expires_at < ? or holder = any(?::text[])
            order by expires_at limit 500
           for update skip locked)
         returning user_id, credits`,
        [now, deadHolders]
      )
      for (const row of rows.rows as { user_id: string; credits: number }[]) {
        if (row.credits <= 0) continue
        await trx.rawQuery(
          'update users set ai_credits_balance = ai_credits_balance + ? where id = ?',
          [row.credits, row.user_id]
        )
        authCache.forgetUser(row.user_id, trx)
      }
      return rows.rows.length as number
    })
    total += batch
    if (batch < 500) break
  }
  if (total > 0) logger.warn({ holds: total }, 'chat: returned credit holds of unsettled requests')
  return total
}

/** Registered by start/jobs.ts: gives expired holds back every minute. */
export const releaseExpiredHoldsJob: PeriodicJob = {
  name: 'chat.release_credit_holds',
  // Also right after start: holds of a killed predecessor come back at once.
  everyMs: 60_000,
  run: async () => {
    await releaseExpiredHolds()
  },
}
