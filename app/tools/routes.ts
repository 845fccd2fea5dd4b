import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'

const ToolsController = () => import('#tools/controllers/tools_controller')

router
  .group(() => {
    router.post('/:id/scan-token', [ToolsController, 'scanToken']).as('scanToken')
    router.post('/:id/research', [ToolsController, 'research']).as('research')
    router.get('/:id/wallet-watch', [ToolsController, 'walletWatch']).as('walletWatch')
    router.post('/:id/wallet-watch', [ToolsController, 'setWalletWatch']).as('setWalletWatch')
  })
  .prefix('/agents')
  .as('agents.tools')
  .where('id', router.matchers.uuid())
  .use(middleware.auth({ guards: ['jwt'] }))
