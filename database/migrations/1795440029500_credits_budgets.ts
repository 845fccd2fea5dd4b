import { BaseSchema } from '@adonisjs/lucid/schema'

/**
 * Monthly AI Credit budgets (docs/accounts.md "Budgets"): the account's on
 * `users`, an agent's in its config (`config.budget.monthlyCredits`).
 *
 * - `credit_ledger.agent_id`: the agent a debit was for, generated from the
 *   `agentId` that hosted and proxied calls already write into `metadata`
 *   (no write path changes; existing rows are filled by the rewrite). Plain
 *   column, so the month's spend of an agent is an index-only range scan.
 * - Two partial indexes over debits only, carrying `credits`: an agent's
 *   and an account's spend since the start of the month.
 * - `chat_credit_holds.agent_id`: holds in flight count against the budget
 *   of the agent that holds them.
 * - `credit_budget_alerts`: the 80 % and 100 % alerts sent, one per budget
 *   (scope and amount), month and threshold: the primary key makes sending
 *   them idempotent; a raised budget is a new one, whose thresholds alert
 *   again.
 */
export default class extends BaseSchema {
  async up() {
    this.schema.raw(
      `alter table users add column ai_credits_monthly_budget integer null
         constraint users_ai_credits_monthly_budget_positive check (ai_credits_monthly_budget > 0)`
    )
    this.schema.raw(
      `alter table credit_ledger add column agent_id text
         generated always as (metadata ->> 'agentId') stored`
    )
    this.schema.raw(
      `create index credit_ledger_agent_spend on credit_ledger (agent_id, created_at)
         include (credits) where credits < 0 and agent_id is not null`
    )
    this.schema.raw(
      `create index credit_ledger_user_spend on credit_ledger (user_id, created_at)
         include (credits) where credits < 0`
    )
    this.schema.raw('alter table chat_credit_holds add column agent_id uuid null')
    this.schema.raw(
      `create index chat_credit_holds_agent on chat_credit_holds (agent_id)
         where agent_id is not null`
    )
    this.schema.createTable('credit_budget_alerts', (table) => {
      table.uuid('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
      // 'account', or the agent's id.
      table.string('scope', 64).notNullable()
      // The UTC month, 'YYYY-MM'.
      table.string('period', 7).notNullable()
      table.smallint('threshold').notNullable()
      // The budget's amount when the alert was sent.
      table.integer('monthly_credits').notNullable()
      table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(this.now())
      table.primary(['user_id', 'scope', 'period', 'threshold', 'monthly_credits'])
    })
  }

  async down() {
    this.schema.dropTable('credit_budget_alerts')
    this.schema.raw('drop index if exists chat_credit_holds_agent')
    this.schema.raw('alter table chat_credit_holds drop column agent_id')
    this.schema.raw('drop index if exists credit_ledger_user_spend')
    this.schema.raw('drop index if exists credit_ledger_agent_spend')
    this.schema.raw('alter table credit_ledger drop column agent_id')
    this.schema.raw('alter table users drop column ai_credits_monthly_budget')
  }
}
