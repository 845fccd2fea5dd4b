import type { HttpContext } from '@adonisjs/core/http'
import { symbols } from '@adonisjs/auth'
import type { AuthClientResponse, GuardContract } from '@adonisjs/auth/types'
import type User from '#identity/models/user'
import { AuthRequiredException } from '#core/exceptions/api_exceptions'
import {
  authenticateBearer,
  type AuthenticatedIdentity,
  bearerFromHeader,
  type CredentialKind,
} from '#identity/services/token_authenticator'

/**
 * An @adonisjs/auth guard (v7 custom-guard contract) reading
 * `Authorization: Bearer <token>`. The `jwt` guard accepts dashboard JWTs
 * only, the `api` guard `hk_` API keys only; both delegate the check to
 * token_authenticator, the code the WebSocket upgrade uses too.
 */
export class BearerGuard implements GuardContract<User> {
  declare [symbols.GUARD_KNOWN_EVENTS]: {}

  readonly driverName: string
  authenticationAttempted = false
  isAuthenticated = false
  /** What authenticated this request: the users row, the key, the model on demand. */
  identity?: AuthenticatedIdentity
  /** The API key that authenticated this request (api guard). */
  apiKeyId: string | null = null
  /** Why the last attempt failed, for a precise 401 message. */
  failure?: AuthRequiredException

  constructor(
    private ctx: HttpContext,
    private kind: CredentialKind
  ) {
    this.driverName = kind === 'jwt' ? 'jwt' : 'api_key'
  }

  async authenticate(): Promise<User> {
    await this.authenticateIdentity()
    return this.getUserOrFail()
  }

  /** Like `authenticate`, without building the model (hot paths read the row). */
  async authenticateIdentity(): Promise<AuthenticatedIdentity> {
    if (this.authenticationAttempted) {
      if (!this.identity) throw this.failure ?? new AuthRequiredException()
      return this.identity
    }
    this.authenticationAttempted = true
    try {
      const token = bearerFromHeader(this.ctx.request.header('authorization'))
      const identity = await authenticateBearer(token, { allow: [this.kind] })
      this.identity = identity
      this.apiKeyId = identity.apiKeyId
      this.isAuthenticated = true
      return identity
    } catch (error) {
      if (error instanceof AuthRequiredException) this.failure = error
      throw error
    }
  }

  /** Reads the identity again: the account's own writes that just ended may have changed its row. */
  async reauthenticate(): Promise<void> {
    this.authenticationAttempted = false
    this.isAuthenticated = false
    this.identity = undefined
    await this.authenticateIdentity()
  }

  async check(): Promise<boolean> {
    try {
      await this.authenticateIdentity()
      return true
    } catch (error) {
      if (error instanceof AuthRequiredException) return false
      throw error
    }
  }

  /** The model is built on first access (see token_authenticator). */
  get user(): User | undefined {
    return this.identity?.user
  }

  getUserOrFail(): User {
    if (!this.user) throw this.failure ?? new AuthRequiredException()
    return this.user
  }

  async authenticateAsClient(): Promise<AuthClientResponse> {
    throw new Error('Use tests/helpers/identity (jwtFor, apiKeyFor) to authenticate test clients')
  }
}

/**
 * The identity the request was authenticated with (after `auth`), for code
 * that needs only the users row: no model is built.
 */
export function requestIdentity(ctx: HttpContext): AuthenticatedIdentity {
  const identity = authenticatedGuard(ctx)?.identity
  if (identity) return identity
  throw new AuthRequiredException()
}

/** The bearer guard that authenticated the request, if one did. */
export function authenticatedGuard(ctx: HttpContext): BearerGuard | undefined {
  const name = ctx.auth.authenticatedViaGuard
  const guard = name ? ctx.auth.use(name) : undefined
  return guard instanceof BearerGuard && guard.identity ? guard : undefined
}

/** Guard factory for config/auth.ts. */
export function bearerGuard(kind: CredentialKind) {
  return {
    async resolver() {
      return (ctx: HttpContext) => new BearerGuard(ctx, kind)
    },
  }
}
