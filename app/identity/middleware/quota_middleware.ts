import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import { RateLimitExceededException } from '#core/exceptions/api_exceptions'
import type User from '#identity/models/user'
import quotaService, { type QuotaResult } from '#identity/services/quota_service'

declare module '@adonisjs/core/http' {
  interface HttpContext {
    /** Today's /api/v1 quota after counting this request (set by `quota`). */
    quota?: QuotaResult
  }
}

export function setQuotaHeaders(ctx: HttpContext, quota: QuotaResult) {
  ctx.response.header('X-RateLimit-Limit', String(quota.limit))
  ctx.response.header('X-RateLimit-Remaining', String(quota.remaining))
  ctx.response.header('X-RateLimit-Reset', quota.resetAt.toISOString())
}

/**
 * Counts the request against the account's daily /api/v1 limit (after
 * `auth`). Every answer carries X-RateLimit-*; past the limit, 429.
 */
export default class QuotaMiddleware {
  async handle(ctx: HttpContext, next: NextFn) {
    const user = ctx.auth.getUserOrFail() as User
    const quota = await quotaService.consume(user)
    ctx.quota = quota
    setQuotaHeaders(ctx, quota)
    if (!quota.allowed) {
      throw new RateLimitExceededException(
        `Daily request limit of ${quota.limit} reached; it resets at ${quota.resetAt.toISOString()}`
      )
    }
    return next()
  }
}
