/** What the credits routes take and answer (the source of their part of /openapi.json). */
import { t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import { ForbiddenException, NotFoundException } from '#core/exceptions/api_exceptions'
import { grantValidator, historyValidator } from '#credits/validators/credits_validators'

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
})
