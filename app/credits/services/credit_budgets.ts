import db from '@adonisjs/lucid/services/db'
import logger from '@adonisjs/core/services/logger'
import { preparedQuery } from '#core/database/prepared_query'
import { InsufficientCreditsException } from '#core/exceptions/api_exceptions'
import { recordFeedEvent } from '#agents/services/feed_service'
import { notify } from '#identity/services/notification_service'

/**
 * Monthly AI Credit budgets (docs/accounts.md "Budgets"): one per agent
 * (`config.budget.monthlyCredits`) and one per account
 * (`users.ai_credits_monthly_budget`). Spending is counted per UTC calendar
 * month from the ledger's debits (an agent's: those whose `agent_id` is
 * the agent) plus the holds in flight. `reserveCredits` refuses a hold
 * that would pass a budget (402 INSUFFICIENT_CREDITS naming it); every
 * hosted and proxied model call takes a hold, so every chat path obeys.
 * At 80 % and 100 % the owner gets one notification and the agent one
 * feed event, once per budget and month.
 */
export type BudgetScope = 'agent' | 'account'

/** Thresholds that alert, in percent of the budget. */
export const BUDGET_ALERT_THRESHOLDS = [80, 100] as const

/** The budgets a hold is checked against (null: none set). */
export interface BudgetContext {
  userId: string
  agentId: string | null
  agentBudget: number | null
  accountBudget: number | null
}

export interface BudgetMonth {
  /** 'YYYY-MM' (UTC). */
  period: string
  start: Date
  /** When the budget resets: the start of the next UTC month. */
  resetsAt: Date
}

export function budgetMonth(now: Date = new Date()): BudgetMonth {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1))
  const resetsAt = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1))
  return { period: start.toISOString().slice(0, 7), start, resetsAt }
}

/**
 * The agent's budget read from its stored config inside SQL (`agents`
 * aliased `a`), so a hold sees a raised budget at once without any caller
 * passing it. Only a JSON number counts (validateAgentConfig accepts
 * positive integers only; anything older is ignored rather than failing).
 */
export const AGENT_BUDGET_SQL = `case when jsonb_typeof(a.config -> 'budget' -> 'monthlyCredits') = 'number'
   and (a.config -> 'budget' ->> 'monthlyCredits')::numeric >= 1
  then least(floor((a.config -> 'budget' ->> 'monthlyCredits')::numeric), 2147483647)::integer end`

/** An agent's monthly budget from its config, as AGENT_BUDGET_SQL reads it; null: none. */
export function agentMonthlyBudget(config: Record<string, unknown>): number | null {
  const credits = (config.budget as { monthlyCredits?: unknown } | null | undefined)?.monthlyCredits
  return typeof credits === 'number' && credits >= 1 ? Math.floor(credits) : null
}

/** A refused hold: which budget, how much is spent, when it resets. */
export interface BudgetRefusal {
  scope: BudgetScope
  userId: string
  agentId: string | null
  monthlyCredits: number
  spentCredits: number
  /** What the budget still leaves for new holds (spent and held deducted). */
  remainingCredits: number
  requestedCredits: number
  month: BudgetMonth
}

/** 402 INSUFFICIENT_CREDITS naming the budget that refuses and when it resets. */
export class BudgetExceededException extends InsufficientCreditsException {
  constructor(readonly refusal: BudgetRefusal) {
    super(refusalMessage(refusal))
  }
}

function budgetOwner(scope: BudgetScope): string {
  return scope === 'agent' ? "This agent's" : "Your account's"
}

function raiseHint(scope: BudgetScope): string {
  return scope === 'agent'
    ? 'raise config.budget.monthlyCredits of the agent'
    : 'raise it with PUT /ai-credits/budget'
}

function refusalMessage(refusal: BudgetRefusal): string {
  const { scope, monthlyCredits, spentCredits, remainingCredits, requestedCredits } = refusal
  const state =
    remainingCredits <= 0
      ? 'is used up'
      : `leaves ${remainingCredits} credits, less than this request may cost (${requestedCredits})`
  return (
    `${budgetOwner(scope)} monthly AI Credit budget of ${monthlyCredits} credits ${state} ` +
    `(${spentCredits} spent in ${refusal.month.period}); it resets at ` +
    `${refusal.month.resetsAt.toISOString()}, or ${raiseHint(scope)}`
  )
}

/** The budgets that apply to a hold, or null when none does (nothing more to check). */
export function budgetContext(
  userId: string,
  agentId: string | null,
  agentBudget: number | null,
  accountBudget: number | null
): BudgetContext | null {
  if (agentBudget === null && accountBudget === null) return null
  return { userId, agentId, agentBudget, accountBudget }
}

interface SpendRow {
  account_spent: string
  account_held: string
  agent_spent: string
  agent_held: string
}

interface Spend {
  spent: number
  held: number
}

/**
 * This month's debits of the account and of the agent (only of the scopes
 * whose budget is set), and the credits other holds in flight have taken.
 * Index-only range scans over debits (credit_ledger_user_spend,
 * credit_ledger_agent_spend).
 */
export async function spendOf(
  context: BudgetContext,
  month: BudgetMonth,
  exceptHoldId: string | null
): Promise<{ account: Spend; agent: Spend }> {
  const agentId = context.agentBudget !== null ? context.agentId : null
  const result = await preparedQuery<SpendRow>(
    'credits.budget_spend',
    `select
       (select coalesce(-sum(credits), 0) from credit_ledger
         where $3 and user_id = $1 and credits < 0 and created_at >= $5 and created_at < $6
       )::bigint as account_spent,
       (select coalesce(sum(credits), 0) from chat_credit_holds
         where $3 and user_id = $1 and id is distinct from $7
       )::bigint as account_held,
       (select coalesce(-sum(credits), 0) from credit_ledger
         where agent_id = $2 and credits < 0 and created_at >= $5 and created_at < $6
       )::bigint as agent_spent,
       (select coalesce(sum(credits), 0) from chat_credit_holds
         where agent_id = $4 and id is distinct from $7
       )::bigint as agent_held`,
    [
      context.userId,
      agentId,
      context.accountBudget !== null,
      agentId,
      month.start,
      month.resetsAt,
      exceptHoldId,
    ]
  )
  const row = result.rows[0]
  return {
    account: { spent: Number(row.account_spent), held: Number(row.account_held) },
    agent: { spent: Number(row.agent_spent), held: Number(row.agent_held) },
  }
}

/** The scopes whose budget is set, the agent's first (the narrower one names the refusal). */
function budgetsOf(context: BudgetContext): { scope: BudgetScope; monthlyCredits: number }[] {
  const budgets: { scope: BudgetScope; monthlyCredits: number }[] = []
  if (context.agentBudget !== null && context.agentId) {
    budgets.push({ scope: 'agent', monthlyCredits: context.agentBudget })
  }
  if (context.accountBudget !== null) {
    budgets.push({ scope: 'account', monthlyCredits: context.accountBudget })
  }
  return budgets
}

/**
 * Checks a hold that is already taken (and committed) against its
 * budgets: the month's spend, the other holds in flight and this one (at
 * least 1 credit, as with the balance: a used-up budget refuses even a
 * free call). Taking the hold first and checking after means two requests
 * racing for the last credits can never both pass: the later check sees
 * the earlier hold. Throws BudgetExceededException; the caller returns the hold.
 */
export async function assertWithinBudgets(
  context: BudgetContext,
  hold: { id: string; credits: number },
  now: Date = new Date()
): Promise<void> {
  const month = budgetMonth(now)
  const spend = await spendOf(context, month, hold.id)
  const requested = Math.max(hold.credits, 1)
  for (const { scope, monthlyCredits } of budgetsOf(context)) {
    const { spent, held } = spend[scope]
    if (spent + held + requested <= monthlyCredits) continue
    throw new BudgetExceededException({
      scope,
      userId: context.userId,
      agentId: context.agentId,
      monthlyCredits,
      spentCredits: spent,
      remainingCredits: Math.max(monthlyCredits - spent - held, 0),
      requestedCredits: hold.credits,
      month,
    })
  }
}

interface Alert {
  scope: BudgetScope
  threshold: number
  monthlyCredits: number
  spentCredits: number
}

async function agentName(agentId: string | null): Promise<string | null> {
  if (!agentId) return null
  const row = await db.from('agents').where('id', agentId).select('name').first()
  return row?.name ?? null
}

function alertTexts(alert: Alert, month: BudgetMonth, name: string | null) {
  const whose = alert.scope === 'agent' ? `Agent "${name ?? 'unknown'}"` : 'Your account'
  const reached =
    alert.threshold >= 100
      ? `has used its monthly AI Credit budget`
      : `has used ${alert.threshold} % of its monthly AI Credit budget`
  const consequence =
    alert.threshold >= 100
      ? `Hosted and proxied model calls${alert.scope === 'agent' ? ' of this agent' : ''} are refused until the budget resets at ${month.resetsAt.toISOString()} or you raise it.`
      : `At 100 % its hosted and proxied model calls are refused until ${month.resetsAt.toISOString()}.`
  return {
    title: `${whose} ${reached}`,
    body: `${alert.spentCredits} of ${alert.monthlyCredits} AI Credits spent in ${month.period}. ${consequence}`,
    feed: `AI Credit budget: ${alert.scope === 'agent' ? "this agent's" : "the account's"} ${alert.threshold} % of ${alert.monthlyCredits} credits reached in ${month.period} (${alert.spentCredits} spent)`,
  }
}

/**
 * Sends each alert once per budget, month and threshold: the row of
 * `credit_budget_alerts` is the proof it was sent (a concurrent second
 * crossing conflicts and sends nothing). Notification and row commit together.
 */
async function sendAlerts(context: BudgetContext, alerts: Alert[], month: BudgetMonth) {
  if (alerts.length === 0) return
  const name = await agentName(context.agentId)
  for (const alert of alerts) {
    const texts = alertTexts(alert, month, name)
    const sent = await db.transaction(async (trx) => {
      const inserted = await trx.rawQuery(
        `insert into credit_budget_alerts (user_id, scope, period, threshold, monthly_credits, created_at)
         values (?, ?, ?, ?, ?, now()) on conflict do nothing returning 1`,
        [
          context.userId,
          alert.scope === 'agent' && context.agentId ? context.agentId : 'account',
          month.period,
          alert.threshold,
          alert.monthlyCredits,
        ]
      )
      if (inserted.rows.length === 0) return false
      await notify(
        context.userId,
        { type: 'ai_credits_budget', title: texts.title, body: texts.body },
        { trx }
      )
      return true
    })
    // The feed belongs to the agent whose call crossed the budget (an account budget too).
    if (sent && context.agentId) {
      await recordFeedEvent(context.agentId, { type: 'budget', content: texts.feed })
    }
  }
}

/**
 * After a settled charge: alerts for every threshold the month's spend has
 * reached. A charge that jumps several thresholds alerts each of them.
 * Never throws (the charge is done; a failed alert is logged).
 */
export async function alertReachedThresholds(
  context: BudgetContext,
  now: Date = new Date()
): Promise<void> {
  try {
    const month = budgetMonth(now)
    const spend = await spendOf(context, month, null)
    const alerts: Alert[] = []
    for (const { scope, monthlyCredits } of budgetsOf(context)) {
      const spent = spend[scope].spent
      for (const threshold of BUDGET_ALERT_THRESHOLDS) {
        if (spent * 100 >= threshold * monthlyCredits) {
          alerts.push({ scope, threshold, monthlyCredits, spentCredits: spent })
        }
      }
    }
    await sendAlerts(context, alerts, month)
  } catch (error) {
    logger.error({ err: error, userId: context.userId }, 'credits: budget alert failed')
  }
}

/**
 * A model call refused by a budget: the budget counts as reached (its
 * 100 % alert), even when the spend itself is a little under it, since
 * calls are being refused. Never throws.
 */
export async function alertBudgetRefusal(refusal: BudgetRefusal): Promise<void> {
  try {
    const context: BudgetContext = {
      userId: refusal.userId,
      agentId: refusal.agentId,
      agentBudget: refusal.scope === 'agent' ? refusal.monthlyCredits : null,
      accountBudget: refusal.scope === 'account' ? refusal.monthlyCredits : null,
    }
    await sendAlerts(
      context,
      [
        {
          scope: refusal.scope,
          threshold: 100,
          monthlyCredits: refusal.monthlyCredits,
          spentCredits: refusal.spentCredits,
        },
      ],
      refusal.month
    )
  } catch (error) {
    logger.error({ err: error, userId: refusal.userId }, 'credits: budget alert failed')
  }
}

export interface AccountBudgetView {
  /** null: no account budget. */
  monthlyCredits: number | null
  /** Debits of the account in the current UTC month. */
  spentCredits: number
  period: string
  resetsAt: string
}

/** GET /ai-credits/budget. */
export async function accountBudgetView(
  userId: string,
  now: Date = new Date()
): Promise<AccountBudgetView> {
  const month = budgetMonth(now)
  const row = await db.from('users').where('id', userId).select('ai_credits_monthly_budget').first()
  const monthlyCredits: number | null = row?.ai_credits_monthly_budget ?? null
  const spend = await spendOf(
    { userId, agentId: null, agentBudget: null, accountBudget: monthlyCredits ?? 0 },
    month,
    null
  )
  return {
    monthlyCredits,
    spentCredits: spend.account.spent,
    period: month.period,
    resetsAt: month.resetsAt.toISOString(),
  }
}

/** PUT /ai-credits/budget: sets (a positive integer) or removes (null) the account's budget. */
export async function setAccountBudget(
  userId: string,
  monthlyCredits: number | null
): Promise<AccountBudgetView> {
  await db.from('users').where('id', userId).update({ ai_credits_monthly_budget: monthlyCredits })
  return accountBudgetView(userId)
}
