import { Secret } from '@adonisjs/core/helpers'
import db from '@adonisjs/lucid/services/db'
import { authCache } from '#identity/services/auth_cache'
import User from '#identity/models/user'
import { AuthRequiredException } from '#core/exceptions/api_exceptions'
import { API_KEY_PREFIX, isUuid } from '#identity/services/api_key_tokens_provider'
import { verifyJwt } from '#identity/services/jwt'

/** The two bearer credentials: dashboard JWTs and `hk_` API keys. */
export type CredentialKind = 'jwt' | 'api_key'

export interface AuthenticatedIdentity {
  user: User
  via: CredentialKind
  /** The API key used, when `via` is `api_key`. */
  apiKeyId: string | null
}

const MESSAGES = {
  missing: 'Authentication required: send "Authorization: Bearer <token>"',
  invalid: 'Invalid or expired credential',
  apiKeyNotAllowed:
    'API keys are accepted only on /api/v1 and the agent WebSocket; sign in for a JWT instead',
  jwtNotAllowed: 'A JWT is not accepted here; use an API key (hk_...)',
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerFromHeader(header: string | null | undefined): string | null {
  if (!header) return null
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
  return match ? match[1] : null
}

/** Which kind of credential a token claims to be, by its shape. */
export function credentialKind(token: string): CredentialKind {
  return token.startsWith(API_KEY_PREFIX) ? 'api_key' : 'jwt'
}

/** A user by id through the auth cache (a fresh model instance each time). */
export async function loadUser(id: string): Promise<User | null> {
  if (!isUuid(id)) return null
  let row = authCache.user(id)
  if (!row) {
    const readStartedAt = authCache.now()
    row = await db.from(User.table).where('id', id).first()
    if (!row) return null
    authCache.storeUser(row, readStartedAt)
  }
  return User.$createFromAdapterResult(row) as User
}

async function userFromJwt(token: string): Promise<User | null> {
  const claims = verifyJwt(token)
  return claims ? loadUser(claims.sub) : null
}

/**
 * Verifies a bearer token and returns its user. The one place credentials
 * are checked: the HTTP guards (config/auth.ts) and the WebSocket upgrade
 * both call it. Throws AuthRequiredException (401 AUTH_REQUIRED) for a
 * missing, malformed, expired, revoked or disallowed credential and for a
 * disabled account.
 */
export async function authenticateBearer(
  token: string | null | undefined,
  options: { allow: CredentialKind[] }
): Promise<AuthenticatedIdentity> {
  if (!token) throw new AuthRequiredException(MESSAGES.missing)

  const kind = credentialKind(token)
  if (!options.allow.includes(kind)) {
    throw new AuthRequiredException(
      kind === 'api_key' ? MESSAGES.apiKeyNotAllowed : MESSAGES.jwtNotAllowed
    )
  }

  let user: User | null = null
  let apiKeyId: string | null = null
  if (kind === 'api_key') {
    const verified = await User.apiKeys.verifyWithUser(new Secret(token))
    if (verified) {
      user = User.$createFromAdapterResult(verified.userRow) as User
      apiKeyId = String(verified.token.identifier)
    }
  } else {
    user = await userFromJwt(token)
  }

  if (!user || user.disabledAt) throw new AuthRequiredException(MESSAGES.invalid)
  return { user, via: kind, apiKeyId }
}
