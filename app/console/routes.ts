import router from '@adonisjs/core/services/router'
import transmit from '@adonisjs/transmit/services/main'
import { middleware } from '#start/kernel'

const Session = () => import('#console/controllers/console_session_controller')
const Pages = () => import('#console/controllers/console_pages_controller')
const Actions = () => import('#console/controllers/console_actions_controller')
const Assets = () => import('#console/controllers/console_assets_controller')

router.get('/console/assets/:file', [Assets, 'show']).as('console.asset')
router.get('/favicon.ico', [Assets, 'favicon']).as('favicon')

router
  .group(() => {
    router.get('/login', [Session, 'showLogin']).as('login')
    router.post('/login', [Session, 'login']).as('login.submit')
    router.get('/login/totp', [Session, 'showTotp']).as('totp')
    router.post('/login/totp', [Session, 'verifyTotp']).as('totp.submit')
    router.get('/totp/setup', [Session, 'showSetup']).as('totp.setup')
    router.post('/totp/setup', [Session, 'confirmSetup']).as('totp.confirm')
    router.post('/logout', [Session, 'logout']).as('logout')

    // support and above
    router
      .group(() => {
        router.get('/', [Pages, 'overview']).as('overview')
        router.get('/overview.json', [Pages, 'overviewFigures']).as('overview.figures')
        router.get('/accounts', [Pages, 'accounts']).as('accounts')
        router.get('/accounts/:id', [Pages, 'account']).as('account')
        router
          .post('/accounts/:id/resend-verification', [Actions, 'resendVerification'])
          .as('account.resend')
        router.get('/agents', [Pages, 'agents']).as('agents')
        router.get('/agents/:id', [Pages, 'agent']).as('agent')
        router.get('/support', [Pages, 'support']).as('support')
        router.get('/support/:id', [Pages, 'ticket']).as('ticket')
        router.post('/support/:id/replies', [Actions, 'reply']).as('ticket.reply')
        router.post('/support/:id/status', [Actions, 'setStatus']).as('ticket.status')
        router.post('/support/:id/assign', [Actions, 'assign']).as('ticket.assign')
        router.get('/payments', [Pages, 'payments']).as('payments')
      })
      .use(middleware.consoleAuth())

    router
      .group(() => {
        router
          .post('/agents/:id/:action', [Actions, 'agentAction'])
          .where('action', /^(start|stop|restart|sleep)$/)
          .as('agent.action')
        router.post('/accounts/:id/plan', [Actions, 'setPlan']).as('account.plan')
        router.post('/support/:id/restore', [Actions, 'restoreBackup']).as('ticket.restore')
      })
      .use(middleware.consoleAuth({ role: 'operator' }))

    router
      .group(() => {
        router.post('/accounts/:id/grant', [Actions, 'grant']).as('account.grant')
        router.post('/accounts/:id/role', [Actions, 'setRole']).as('account.role')
        router.post('/accounts/:id/disable', [Actions, 'disable']).as('account.disable')
        router.post('/accounts/:id/enable', [Actions, 'enable']).as('account.enable')
        router.get('/audit', [Pages, 'audit']).as('audit')
      })
      .use(middleware.consoleAuth({ role: 'admin' }))
  })
  .prefix('/console')
  .as('console')
  .use([middleware.consoleSession(), middleware.shield()])

// Live updates: Transmit's SSE and subscribe routes, for signed-in staff only.
transmit.registerRoutes((route) => {
  route.use([middleware.session(), middleware.consoleAuth()])
})
