/*
|--------------------------------------------------------------------------
| HTTP kernel
|--------------------------------------------------------------------------
|
| Server middleware run for every request, even when no route matches;
| router middleware only for matched routes; named middleware on demand.
|
*/
import router from '@adonisjs/core/services/router'
import server from '@adonisjs/core/services/server'

server.errorHandler(() => import('#core/http/exception_handler'))

server.use([
  () => import('#core/http/request_id_middleware'),
  () => import('#core/http/envelope_middleware'),
  () => import('@adonisjs/cors/cors_middleware'),
])

router.use([
  () => import('#core/http/body_limit_middleware'),
  () => import('#core/http/body_parser_middleware'),
  () => import('#core/http/input_gate_middleware'),
  () => import('#identity/middleware/initialize_auth_middleware'),
  () => import('#policies/initialize_bouncer_middleware'),
])

export const middleware = router.named({
  auth: () => import('#identity/middleware/auth_middleware'),
  optionalAuth: () => import('#identity/middleware/optional_auth_middleware'),
  quota: () => import('#identity/middleware/quota_middleware'),
  session: () => import('@adonisjs/session/session_middleware'),
  consoleSession: () => import('#console/middleware/console_session_middleware'),
  shield: () => import('@adonisjs/shield/shield_middleware'),
  consoleAuth: () => import('#console/middleware/console_auth_middleware'),
})
