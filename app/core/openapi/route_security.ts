import type { RouteJSON } from '@adonisjs/core/types/http'

export type CredentialNeed = 'required' | 'optional' | 'none'

/** The one security scheme: API keys (`hk_...`) and JWTs both travel as `Authorization: Bearer`. */
export const BEARER_SCHEME = 'bearerAuth'

/**
 * Marks a plain-function route middleware as demanding a credential (named
 * middleware are recognised by name; functions carry this marker instead).
 */
export const CREDENTIAL_REQUIRED = Symbol.for('agent-host.credential-required')

export function requiresCredential<T extends object>(middleware: T): T {
  Object.defineProperty(middleware, CREDENTIAL_REQUIRED, { value: true })
  return middleware
}

function demandsCredential(entry: unknown): boolean {
  return typeof entry === 'function' && CREDENTIAL_REQUIRED in entry
}

/** Named middleware that accept a credential without demanding one. */
const OPTIONAL_AUTH_MIDDLEWARE = new Set(['silentAuth', 'optionalAuth'])

interface NamedMiddleware {
  name?: string
  args?: unknown
}

function namedMiddleware(route: RouteJSON): NamedMiddleware[] {
  const stack = route.middleware as unknown as { all(): Iterable<unknown> } | unknown[]
  const entries = Array.isArray(stack) ? stack : [...stack.all()]
  return entries.filter((m): m is NamedMiddleware => typeof m === 'object' && m !== null)
}

/**
 * Whether a route needs a credential, read from its middleware rather than a
 * list of paths, so routes other areas add later are classified on their own:
 * - the named middleware `auth` (`middleware.auth(...)`) makes the credential
 *   required, unless it is given `{ optional: true }`;
 * - `silentAuth` / `optionalAuth`, or `auth` with `optional: true`, accept a
 *   credential but do not need one (e.g. GET /agents/by-slug/:slug);
 * - a function middleware marked with requiresCredential() (the /api/v1
 *   key check) makes it required too;
 * - a route with neither is public (health, docs, register, login, webhooks...).
 */
export function credentialNeed(route: RouteJSON): CredentialNeed {
  const stack = route.middleware as unknown as { all(): Iterable<unknown> } | unknown[]
  const entries = Array.isArray(stack) ? stack : [...stack.all()]
  if (entries.some(demandsCredential)) return 'required'

  let need: CredentialNeed = 'none'
  for (const middleware of namedMiddleware(route)) {
    if (middleware.name === 'auth') {
      const args = middleware.args as { optional?: boolean } | undefined
      if (!args?.optional) return 'required'
      need = 'optional'
    } else if (middleware.name && OPTIONAL_AUTH_MIDDLEWARE.has(middleware.name)) {
      need = 'optional'
    }
  }
  return need
}

/**
 * OpenAPI security requirement for a route: `[]` means no credential; the
 * empty requirement `{}` next to bearer means the credential is optional.
 */
export function securityFor(need: CredentialNeed): Record<string, string[]>[] {
  if (need === 'required') return [{ [BEARER_SCHEME]: [] }]
  if (need === 'optional') return [{}, { [BEARER_SCHEME]: [] }]
  return []
}
