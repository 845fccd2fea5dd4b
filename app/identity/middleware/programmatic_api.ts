import { apiKeyAuth } from '#identity/middleware/auth_middleware'
import { dailyQuota } from '#identity/middleware/quota_middleware'

/**
 * Middleware of every /api/v1 route: the API key check, then the daily quota
 * (with the X-RateLimit-* headers). Plain functions, so the router calls them
 * without a container lookup per request.
 */
export const programmaticApi = [apiKeyAuth, dailyQuota]
