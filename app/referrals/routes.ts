import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'

const ReferralsController = () => import('#referrals/controllers/referrals_controller')

router.get('/referrals/validate/:code', [ReferralsController, 'validate']).as('referrals.validate')

router
  .group(() => {
    router.get('/my-code', [ReferralsController, 'myCode']).as('myCode')
    router.get('/stats', [ReferralsController, 'stats']).as('stats')
    router.post('/claim', [ReferralsController, 'claim']).as('claim')
  })
  .prefix('/referrals')
  .as('referrals')
  .use(middleware.auth({ guards: ['jwt'] }))
