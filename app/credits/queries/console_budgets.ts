import db from '@adonisjs/lucid/services/db'
import { AGENT_BUDGET_SQL, budgetMonth, spendOf } from '#credits/services/credit_budgets'

/**
 * Budgets as the staff console reads them (docs/console.md): an agent's
 * monthly AI Credit budget and its owner account's, each with what was
 * spent this UTC month, counted as the enforcement counts it
 * (credit_budgets.ts: the month's debits; holds in flight shown apart).
 */
export interface BudgetUse {
  /** null: no budget set. */
  monthlyCredits: number | null
  /** Debits of this month. */
  spentCredits: number
  /** Credits held by calls in flight (they count against the budget too). */
  heldCredits: number
  /** Whole percent of the budget spent (rounded down, so 100 means used up); null without a budget. */
  percent: number | null
  /** The budget is used up: its calls are refused until the month turns or it is raised. */
  over: boolean
}

export interface AgentBudgets {
  /** 'YYYY-MM' (UTC). */
  period: string
  resetsAt: string
  agent: BudgetUse
  account: BudgetUse
}

function use(monthlyCredits: number | null, spent: number, held: number): BudgetUse {
  return {
    monthlyCredits,
    spentCredits: spent,
    heldCredits: held,
    percent: monthlyCredits === null ? null : Math.floor((spent * 100) / monthlyCredits),
    over: monthlyCredits !== null && spent >= monthlyCredits,
  }
}

/** The agent's budget and its owner's, with this month's use of each. */
export async function budgetsOfAgent(agentId: string, now = new Date()): Promise<AgentBudgets> {
  const month = budgetMonth(now)
  const row = await db
    .from('agents as a')
    .join('users as u', 'u.id', 'a.user_id')
    .where('a.id', agentId)
    .select(
      'a.user_id',
      db.raw(`${AGENT_BUDGET_SQL} as agent_budget`),
      'u.ai_credits_monthly_budget as account_budget'
    )
    .firstOrFail()
  const agentBudget: number | null = row.agent_budget ?? null
  const accountBudget: number | null = row.account_budget ?? null
  // spendOf counts only the scopes whose budget is set: 0 stands in, so the use shows without one.
  const spend = await spendOf(
    {
      userId: row.user_id,
      agentId,
      agentBudget: agentBudget ?? 0,
      accountBudget: accountBudget ?? 0,
    },
    month,
    null
  )
  return {
    period: month.period,
    resetsAt: month.resetsAt.toISOString(),
    agent: use(agentBudget, spend.agent.spent, spend.agent.held),
    account: use(accountBudget, spend.account.spent, spend.account.held),
  }
}
