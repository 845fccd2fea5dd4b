/** What the credits routes take and answer (the source of their part of /openapi.json). */
import { describes, t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import { ForbiddenException, NotFoundException } from '#core/exceptions/api_exceptions'
import {
  accountBudgetValidator,
  grantValidator,
  historyValidator,
} from '#credits/validators/credits_validators'
import type { AccountBudgetView } from '#credits/services/credit_budgets'

const accountBudget = t.named(
  'AccountBudget',
  describes<AccountBudgetView>()(
    t.object({
      monthlyCredits: t.nullable(t.integer()),
      spentCredits: t.integer(),
      period: t.string(),
      resetsAt: t.string(),
    })
  )
)

export default defineContracts({
  'aiCredits.balance': {
    summary: 'AI Credit balance',
    description: "`monthlyGrant` is the tier's monthly grant; `tier` the tier in effect now.",
    responses: {
      200: t.object({
        balance: t.integer(),
        monthlyGrant: t.integer(),
        tier: t.string(),
      }),
    },
  },
  'aiCredits.history': {
    summary: 'AI Credit history',
    description:
      'Usage: every debit (model calls and other spending), newest first; `credits` is the positive number of credits each cost. Free calls (local-dev) are not debits and are not listed.',
    query: historyValidator,
    parameters: { limit: 'Entries to return, 1 to 100 (default 20)' },
    responses: {
      200: t.object({
        usage: t.array(
          t.object({
            id: t.uuid(),
            kind: t.string(),
            provider: t.nullable(t.string()),
            model: t.nullable(t.string()),
            credits: t.integer(),
            inputTokens: t.nullable(t.integer()),
            outputTokens: t.nullable(t.integer()),
            reason: t.nullable(t.string()),
            createdAt: t.dateTime(),
          })
        ),
      }),
    },
  },
  'aiCredits.grant': {
    summary: 'Grant AI Credits (administrators)',
    description:
      '403 for anyone but an admin. Recorded in the ledger with the admin and the reason.',
    body: grantValidator,
    responses: {
      200: t.object({
        id: t.string(),
        userId: t.string(),
        credits: t.integer(),
        reason: t.string(),
        grantedBy: t.string(),
        balance: t.integer(),
        createdAt: t.dateTime(),
      }),
    },
    errors: [ForbiddenException, NotFoundException],
  },
  'aiCredits.budget': {
    summary: 'Monthly AI Credit budget of the account',
    description:
      "`monthlyCredits` is null without a budget. `spentCredits`: the account's debits in the current UTC month (`period`); the budget resets at `resetsAt`. Agents have their own budget in `config.budget.monthlyCredits`.",
    responses: { 200: accountBudget },
  },
  'aiCredits.budget.update': {
    summary: "Set the account's monthly AI Credit budget",
    description:
      "A positive integer, or null to remove it. Hosted and proxied model calls of the account are refused with 402 INSUFFICIENT_CREDITS once the month's spending would pass it; at 80 % and 100 % the owner is notified once a month.",
    body: accountBudgetValidator,
    // Null removes the budget, but the field must be there (the validator's nullable, not optional).
    bodyRules: { required: ['monthlyCredits'] },
    responses: { 200: accountBudget },
  },
})
