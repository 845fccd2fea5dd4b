import router from '@adonisjs/core/services/router'

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
