import { Secret } from '@adonisjs/core/helpers'
import db from '@adonisjs/lucid/services/db'
import { authCache } from '#identity/services/auth_cache'
import User from '#identity/models/user'
import { AuthRequiredException } from '#core/exceptions/api_exceptions'
import { API_KEY_PREFIX } from '#identity/services/api_key_tokens_provider'
import { isUuid } from '#core/http/ids'
import { verifyJwt } from '#identity/services/jwt'

/** The two bearer credentials: dashboard JWTs and `hk_` API keys. */
export type CredentialKind = 'jwt' | 'api_key'

export interface AuthenticatedIdentity {
  /** The account as a model, hydrated on first access from `row`. */
  readonly user: User
  /** The users row (a cached snapshot: never mutate it). */
  row: Readonly<Record<string, unknown>>
  via: CredentialKind
  /** The API key used, when `via` is `api_key`. */
  apiKeyId: string | null
}

/**
 * Hot paths (the /api/v1 middleware, GET /api/v1/me) read the row; a model
 * is built only for code that asks for `user`, since hydrating one per
 * request costs more than the rest of the authentication.
 */
function identity(
  row: Readonly<Record<string, unknown>>,
  via: CredentialKind,
  apiKeyId: string | null
): AuthenticatedIdentity {
  let user: User | undefined
  return {
    row,
    via,
    apiKeyId,
    get user() {
      user ??= User.$createFromAdapterResult(row) as User
      return user
    },
  }
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

/** A users row by id through the auth cache. */
async function loadUserRow(id: string): Promise<Record<string, unknown> | null> {
  if (!isUuid(id)) return null
  let row = authCache.user(id)
  if (!row) {
    const readStartedAt = authCache.now()
    row = await db.from(User.table).where('id', id).first()
    if (!row) return null
    authCache.storeUser(row, readStartedAt)
  }
  return row
}

/** A user by id through the auth cache (a fresh model instance each time). */
export async function loadUser(id: string): Promise<User | null> {
  const row = await loadUserRow(id)
  return row ? (User.$createFromAdapterResult(row) as User) : null
}

async function userRowFromJwt(token: string) {
  const claims = verifyJwt(token)
  if (!claims) return null
  const row = await loadUserRow(claims.sub)
  // Ended by sign-out or a revoked session family since it was issued.
  if (row && Number(row.token_version ?? 0) !== (claims.ver ?? 0)) return null
  return row
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

  let row: Record<string, unknown> | null = null
  let apiKeyId: string | null = null
  if (kind === 'api_key') {
    const verified = await User.apiKeys.verifyWithUser(new Secret(token))
    if (verified) {
      row = verified.userRow
      apiKeyId = verified.keyId
    }
  } else {
    row = await userRowFromJwt(token)
  }

  // disabled_at as the model would see it: any non-null value locks the account.
  if (!row || (row.disabled_at !== null && row.disabled_at !== undefined)) {
    throw new AuthRequiredException(MESSAGES.invalid)
  }
  return identity(row, kind, apiKeyId)
}
