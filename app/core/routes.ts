import router from '@adonisjs/core/services/router'
import { registerPeriodicJob } from '#core/jobs/periodic_jobs'
import { purgeExpired } from '#core/cache/shared_cache'
import '#identity/routes'
import '#credits/routes'
import '#support/routes'
import '#billing/routes'
import '#referrals/routes'
import '#chat/routes'
import '#agents/routes'
import '#skills/routes'
import '#schedules/routes'
import '#knowledge/routes'
import '#tools/routes'
import '#channels/routes'
import '#console/routes'

// The database copy of the shared cache keeps only what has not expired.
registerPeriodicJob({
  name: 'cache.purge',
  everyMs: 10 * 60_000,
  run: () => purgeExpired().then(() => {}),
})

const HealthController = () => import('#core/health/health_controller')
const LandingController = () => import('#core/http/landing_controller')
const OpenApiController = () => import('#core/openapi/openapi_controller')

router.get('/', [LandingController]).as('landing')
router.get('/health', [HealthController]).as('health')

router.get('/openapi.json', [OpenApiController, 'document']).as('openapi.document')
router.get('/docs', [OpenApiController, 'explorer']).as('docs.explorer')
router.get('/docs/assets/:file', [OpenApiController, 'asset']).as('docs.asset')

if (process.env.NODE_ENV === 'test') {
  await import('#core/testing_routes')
}
