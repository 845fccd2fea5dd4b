import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'
import { exportSections } from '#identity/services/export_sections'
import ReferralReward from '#referrals/models/referral_reward'

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

exportSections.register('referral_rewards', async (userId) => {
  const rows = await ReferralReward.query()
    .where('referrer_id', userId)
    .orWhere('referred_id', userId)
    .orderBy('created_at', 'asc')
  return rows.map((row) => ({
    id: row.id,
    role: row.referrerId === userId ? 'referrer' : 'referred',
    referrerId: row.referrerId,
    referredId: row.referredId,
    credits: row.creditsEach,
    createdAt: row.createdAt.toUTC().toISO(),
  }))
})
