import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'
import { programmaticApiReadingAhead } from '#identity/middleware/programmatic_api'
import { readChatAhead } from '#chat/middleware/read_chat_ahead'

const ChatController = () => import('#chat/controllers/chat_controller')
const HistoryController = () => import('#chat/controllers/history_controller')
const WebhooksController = () => import('#chat/controllers/webhooks_controller')
const ModelProxyController = () => import('#chat/controllers/model_proxy_controller')

router
  .post('/api/v1/agents/:id/chat', [ChatController, 'programmatic'])
  .as('api.v1.agents.chat')
  .use(programmaticApiReadingAhead(readChatAhead))

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
