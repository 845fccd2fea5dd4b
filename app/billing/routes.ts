import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'

const FeaturesController = () => import('#billing/controllers/features_controller')
const WalletController = () => import('#billing/controllers/wallet_controller')
const RetiredController = () => import('#billing/controllers/retired_controller')

router.get('/features', [FeaturesController, 'index']).as('features.index')

// Retired credit-based billing: 410 whatever the credential.
router
  .post('/features/subscribe-with-credits', [RetiredController, 'gone'])
  .as('features.subscribeWithCredits')
router
  .post('/features/addon-with-credits', [RetiredController, 'gone'])
  .as('features.addonWithCredits')
router.any('/credits', [RetiredController, 'gone']).as('credits.retired')
router.any('/credits/*', [RetiredController, 'gone']).as('credits.retiredAll')

router
  .group(() => {
    router.get('/account', [FeaturesController, 'account']).as('account')
    router.post('/quote', [FeaturesController, 'quote']).as('quote')
    router.post('/subscribe', [FeaturesController, 'subscribe']).as('subscribe')
    router.post('/addon', [FeaturesController, 'addon']).as('addon')
  })
  .prefix('/features')
  .as('features')
  .use(middleware.auth({ guards: ['jwt'] }))

router
  .group(() => {
    router.post('/wallet/nonce', [WalletController, 'nonce']).as('nonce')
    router.post('/wallet', [WalletController, 'link']).as('link')
  })
  .prefix('/auth')
  .as('auth.wallet')
  .use(middleware.auth({ guards: ['jwt'] }))
