import router from '@adonisjs/core/services/router'
import { middleware } from '#start/kernel'
import { programmaticApi } from '#identity/middleware/programmatic_api'

const AuthController = () => import('#identity/controllers/auth_controller')
const ApiKeysController = () => import('#identity/controllers/api_keys_controller')
const PasswordController = () => import('#identity/controllers/password_controller')
const NotificationsController = () => import('#identity/controllers/notifications_controller')
const DataExportController = () => import('#identity/controllers/data_export_controller')
const ProgrammaticController = () => import('#identity/controllers/programmatic_controller')

router
  .group(() => {
    router.post('/register', [AuthController, 'register']).as('register')
    router.get('/verify-email/:token', [AuthController, 'verifyEmail']).as('verifyEmail')
    router
      .post('/resend-verification', [AuthController, 'resendVerification'])
      .as('resendVerification')
    router.post('/login', [AuthController, 'login']).as('login')
    router.post('/password/forgot', [PasswordController, 'forgot']).as('password.forgot')
    router.post('/password/reset', [PasswordController, 'reset']).as('password.reset')
    router.post('/refresh', [AuthController, 'refresh']).as('refresh')
    router.post('/logout', [AuthController, 'logout']).as('logout')
    // Signed link from the export mail; checks signature and owner itself.
    router.get('/export-data/:id/download', [DataExportController, 'download']).as('exportDownload')

    router
      .group(() => {
        router.post('/api-keys', [ApiKeysController, 'store']).as('apiKeys.store')
        router.post('/password/change', [PasswordController, 'change']).as('password.change')
        router.get('/api-keys', [ApiKeysController, 'index']).as('apiKeys.index')
        router.delete('/api-keys/:id', [ApiKeysController, 'destroy']).as('apiKeys.destroy')
        router.get('/notifications', [NotificationsController, 'index']).as('notifications.index')
        router
          .patch('/notifications/read', [NotificationsController, 'markRead'])
          .as('notifications.read')
        router.post('/export-data', [DataExportController, 'store']).as('exportData')
      })
      .use(middleware.auth({ guards: ['jwt'] }))
  })
  .prefix('/auth')
  .as('auth')

router
  .group(() => {
    router.get('/me', [ProgrammaticController, 'me']).as('me')
    router.get('/usage', [ProgrammaticController, 'usage']).as('usage')
  })
  .prefix('/api/v1')
  .as('api.v1')
  .use(programmaticApi)
