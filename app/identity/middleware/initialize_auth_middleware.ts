import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import app from '@adonisjs/core/services/app'
import type { Authenticator } from '@adonisjs/auth'
import type { AuthService, Authenticators, GuardFactory } from '@adonisjs/auth/types'

declare module '@adonisjs/core/http' {
  interface HttpContext {
    auth: Authenticator<
      Authenticators extends Record<string, GuardFactory> ? Authenticators : never
    >
  }
}

let manager: AuthService | undefined

/**
 * Gives every request its `ctx.auth`, like the auth package's own
 * initialize middleware, minus what costs on every API call: the package's
 * version resolves the manager from the container per request and touches
 * `ctx.view`, which builds an Edge renderer (disk lookups) even for JSON
 * routes. The console shares `auth` with its views itself.
 */
export default class InitializeAuthMiddleware {
  async handle(ctx: HttpContext, next: NextFn) {
    manager ??= await app.container.make('auth.manager')
    ctx.auth = manager.createAuthenticator(ctx)
    return next()
  }
}
