import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'
import CreditLedgerEntry from '#credits/models/credit_ledger_entry'
import { exportSections } from '#identity/services/export_sections'

const AiCreditsController = () => import('#credits/controllers/ai_credits_controller')

router
  .group(() => {
    router.get('/balance', [AiCreditsController, 'balance']).as('balance')
    router.get('/history', [AiCreditsController, 'history']).as('history')
    router.post('/grant', [AiCreditsController, 'grant']).as('grant')
  })
  .prefix('/ai-credits')
  .as('aiCredits')
  .use(middleware.auth({ guards: ['jwt'] }))

exportSections.register('credit_ledger', async (userId) => {
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
})
