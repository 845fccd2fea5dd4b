import router from '@adonisjs/core/services/router'
import '#identity/routes'
import '#credits/routes'
import '#support/routes'

const HealthController = () => import('#core/health/health_controller')

router.get('/health', [HealthController]).as('health')

if (process.env.NODE_ENV === 'test') {
  await import('#core/testing_routes')
}
