import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import { apiKeyAuth, apiKeyAuthForTurns } from '#identity/middleware/auth_middleware'
import { dailyQuota } from '#identity/middleware/quota_middleware'

/**
 * Middleware of every /api/v1 route: the API key check, then the daily quota
 * (with the X-RateLimit-* headers). Plain functions, so the router calls them
 * without a container lookup per request.
 */
export const programmaticApi = [apiKeyAuth, dailyQuota]

/**
 * The same, with `readAhead` between the key check and the quota: a read the
 * route's handler needs (one that depends only on the caller and the path)
 * starts there and overlaps the quota's database round trip. It must not
 * write: the quota may still refuse the request. For the agent turn's route
 * (apiKeyAuthForTurns: its reads wait for the account's pending writes).
 */
export function programmaticApiReadingAhead(
  readAhead: (ctx: HttpContext, next: NextFn) => unknown
) {
  return [apiKeyAuthForTurns, readAhead, dailyQuota]
}
