import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'

const AiCreditsController = () => import('#credits/controllers/ai_credits_controller')

router
  .group(() => {
    router.get('/balance', [AiCreditsController, 'balance']).as('balance')
    router.get('/history', [AiCreditsController, 'history']).as('history')
    router.post('/grant', [AiCreditsController, 'grant']).as('grant')
    router.get('/budget', [AiCreditsController, 'budget']).as('budget')
    router.put('/budget', [AiCreditsController, 'setBudget']).as('budget.update')
  })
  .prefix('/ai-credits')
  .as('aiCredits')
  .use(middleware.auth({ guards: ['jwt'] }))
