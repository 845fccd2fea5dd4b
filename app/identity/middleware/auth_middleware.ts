import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import type { Authenticators } from '@adonisjs/auth/types'
import { BearerGuard } from '#identity/guards/bearer_guard'

/**
 * `middleware.auth({ guards: ['jwt'] })` on dashboard routes,
 * `middleware.auth({ guards: ['api'] })` on /api/v1. A failure is 401
 * AUTH_REQUIRED with the reason the guard found (missing, invalid, or a
 * credential of the other kind).
 */
export default class AuthMiddleware {
  async handle(
    ctx: HttpContext,
    next: NextFn,
    options: { guards?: (keyof Authenticators)[] } = {}
  ) {
    const guards = options.guards ?? ['jwt']
    try {
      await ctx.auth.authenticateUsing(guards)
    } catch (error) {
      const guard = ctx.auth.use(guards[guards.length - 1])
      throw (guard instanceof BearerGuard && guard.failure) || error
    }
    return next()
  }
}
