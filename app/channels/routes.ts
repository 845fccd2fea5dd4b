import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'

const ChannelsController = () => import('#channels/controllers/channels_controller')

router
  .group(() => {
    router.post('/:id/pair-channel', [ChannelsController, 'pair']).as('pair')
    router.post('/:id/disconnect-channel', [ChannelsController, 'disconnect']).as('disconnect')
    router.get('/:id/channel-status', [ChannelsController, 'status']).as('status')
  })
  .prefix('/agents')
  .as('agents.channels')
  .where('id', router.matchers.uuid())
  .use(middleware.auth({ guards: ['jwt'] }))

router
  .post('/channels/webhooks/:connectionId/:secret', [ChannelsController, 'webhook'])
  .as('channels.webhook')
