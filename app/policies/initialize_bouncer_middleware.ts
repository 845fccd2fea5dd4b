import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import type User from '#identity/models/user'
import { bouncerFor, type ActorBouncer } from '#policies/main'

declare module '@adonisjs/core/http' {
  interface HttpContext {
    bouncer: ActorBouncer<User>
  }
}

/**
 * Gives every request its `ctx.bouncer` for the request's user, like the
 * package's own initialize middleware, without sharing its helpers with
 * Edge: touching `ctx.view` builds a renderer even for JSON routes, and no
 * template uses `@can`. The user is read when a check runs, after the
 * route's `auth` (or `optionalAuth`) middleware.
 */
export default class InitializeBouncerMiddleware {
  async handle(ctx: HttpContext, next: NextFn) {
    ctx.bouncer = bouncerFor(() => ctx.auth.user ?? null, ctx.containerResolver)
    return next()
  }
}
