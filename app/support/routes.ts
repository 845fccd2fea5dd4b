import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'

const TicketsController = () => import('#support/controllers/tickets_controller')

router
  .group(() => {
    router.post('/tickets', [TicketsController, 'store']).as('tickets.store')
    router.get('/tickets', [TicketsController, 'index']).as('tickets.index')
    router.get('/tickets/:id', [TicketsController, 'show']).as('tickets.show')
    router.post('/tickets/:id/replies', [TicketsController, 'reply']).as('tickets.reply')
  })
  .prefix('/support')
  .as('support')
  .use(middleware.auth({ guards: ['jwt'] }))
