import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import { RateLimitExceededException } from '#core/exceptions/api_exceptions'
import { effectiveTierOfRow } from '#identity/models/user'
import { requestIdentity } from '#identity/guards/bearer_guard'
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
 * `auth`). Every answer carries X-RateLimit-*; past the limit, 429. A plain
 * function so routes can use it without a container lookup per request.
 */
export async function dailyQuota(ctx: HttpContext, next: NextFn) {
  const { row } = requestIdentity(ctx)
  const quota = await quotaService.consume({
    id: row.id as string,
    effectiveTier: effectiveTierOfRow(row),
  })
  ctx.quota = quota
  setQuotaHeaders(ctx, quota)
  if (!quota.allowed) {
    throw new RateLimitExceededException(
      `Daily request limit of ${quota.limit} reached; it resets at ${quota.resetAt.toISOString()}`
    )
  }
  return next()
}

/** `middleware.quota()`: see dailyQuota. */
export default class QuotaMiddleware {
  handle(ctx: HttpContext, next: NextFn) {
    return dailyQuota(ctx, next)
  }
}
