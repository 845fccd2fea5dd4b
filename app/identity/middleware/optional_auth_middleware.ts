import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'

/**
 * For public routes that show more to a signed-in owner (GET
 * /agents/by-slug/:slug): attaches the JWT user when a valid token is sent
 * (`ctx.auth.user`), and carries on without one otherwise.
 */
export default class OptionalAuthMiddleware {
  async handle(ctx: HttpContext, next: NextFn) {
    await ctx.auth.checkUsing(['jwt'])
    return next()
  }
}
