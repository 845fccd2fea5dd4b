import router from '@adonisjs/core/services/router'
import db from '@adonisjs/lucid/services/db'
import { middleware } from '#start/kernel'
import { programmaticApi } from '#identity/middleware/programmatic_api'
import { registerPeriodicJob } from '#core/jobs/periodic_jobs'
import { exportSections } from '#identity/services/export_sections'
import { pruneStoredMessages } from '#chat/services/history_service'
import { releaseExpiredHolds } from '#credits/services/credit_holds'
import { purgeExpiredIdempotencyKeys } from '#chat/services/idempotency'

const ChatController = () => import('#chat/controllers/chat_controller')
const HistoryController = () => import('#chat/controllers/history_controller')
const WebhooksController = () => import('#chat/controllers/webhooks_controller')
const ModelProxyController = () => import('#chat/controllers/model_proxy_controller')

router
  .post('/api/v1/agents/:id/chat', [ChatController, 'programmatic'])
  .as('api.v1.agents.chat')
  .use(programmaticApi)

router
  .group(() => {
    router.post('/test-chat', [ChatController, 'testChat']).as('testChat')
    router.post('/:id/chat/stream', [ChatController, 'stream']).as('chat.stream')
    router.get('/:id/chat/history', [HistoryController, 'index']).as('chat.history')
    router.post('/:id/chat/history', [HistoryController, 'replace']).as('chat.history.replace')
    router.delete('/:id/chat/history', [HistoryController, 'clear']).as('chat.history.clear')
    router.get('/:id/analytics', [HistoryController, 'analytics']).as('analytics')
    router.get('/:id/webhook-url', [WebhooksController, 'url']).as('webhookUrl')
  })
  .prefix('/agents')
  .as('agents')
  .use(middleware.auth({ guards: ['jwt'] }))

router.post('/webhooks/in/:token', [WebhooksController, 'inbound']).as('webhooks.inbound')

// The OpenAI-compatible model proxy lives at the service root (`${APP_URL}/v1`).
router
  .group(() => {
    router.post('/chat/completions', [ModelProxyController, 'completions']).as('completions')
    router.get('/models', [ModelProxyController, 'models']).as('models')
  })
  .prefix('/v1')
  .as('modelProxy')

registerPeriodicJob({
  name: 'chat.prune_messages',
  everyMs: 60 * 60_000,
  run: async () => {
    await pruneStoredMessages()
  },
})
registerPeriodicJob({
  name: 'chat.release_credit_holds',
  // Also right after start: holds of a killed predecessor come back at once.
  everyMs: 60_000,
  run: async () => {
    await releaseExpiredHolds()
  },
})
registerPeriodicJob({
  name: 'chat.purge_idempotency_keys',
  everyMs: 60 * 60_000,
  run: async () => {
    await purgeExpiredIdempotencyKeys()
  },
})

exportSections.register('conversations', async (userId) => {
  const result = await db.rawQuery(
    `select m.agent_id, m.role, m.content, m.created_at from chat_messages m
       join agents a on a.id = m.agent_id
      where a.user_id = ? order by m.agent_id, m.created_at, m.seq`,
    [userId]
  )
  return (
    result.rows as { agent_id: string; role: string; content: string; created_at: Date }[]
  ).map((row) => ({
    agentId: row.agent_id,
    role: row.role,
    content: row.content,
    ts: row.created_at.getTime(),
  }))
})
