import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'

const KnowledgeController = () => import('#knowledge/controllers/knowledge_controller')

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
