import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'
import { registerKnowledgeSource } from '#chat/services/system_prompt'
import { relevantPassages } from '#knowledge/services/knowledge_service'

const KnowledgeController = () => import('#knowledge/controllers/knowledge_controller')

// No chunks, no passages: the chat routes learn that with the agent row and skip the search.
registerKnowledgeSource(relevantPassages, {
  presenceSql: 'exists (select 1 from knowledge_chunks k where k.agent_id = agents.id)',
})

router
  .group(() => {
    router.get('/:id/knowledge', [KnowledgeController, 'index']).as('index')
    router.post('/:id/knowledge', [KnowledgeController, 'store']).as('store')
    router.delete('/:id/knowledge/:filename', [KnowledgeController, 'destroy']).as('destroy')
  })
  .prefix('/agents')
  .as('agents.knowledge')
  .where('id', router.matchers.uuid())
  .use(middleware.auth({ guards: ['jwt'] }))
