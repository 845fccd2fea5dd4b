import router from '@adonisjs/core/services/router'
import { MethodNotAllowedException } from '#core/exceptions/api_exceptions'

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const

/** The methods the router has for `url`'s path (none: the path is unknown). */
export function allowedMethods(url: string, hostname?: string | null): string[] {
  return METHODS.filter((method) => router.match(url, method, false, hostname) !== null)
}

/**
 * A route miss on a path that exists under other methods is a 405 with
 * `Allow` (RFC 9110 15.5.6), not a 404: clients and OpenAPI tools tell "no
 * such path" from "not this method". Anything else stays as it was.
 */
export function methodNotAllowed(
  error: unknown,
  request: { url(): string; method(): string; hostname(): string | null }
): MethodNotAllowedException | undefined {
  if ((error as { code?: string } | null)?.code !== 'E_ROUTE_NOT_FOUND') return undefined
  const allowed = allowedMethods(request.url(), request.hostname())
  if (allowed.length === 0) return undefined
  return new MethodNotAllowedException(
    `${request.method()} is not allowed on ${request.url()}; it allows ${allowed.join(', ')}`,
    { headers: { Allow: allowed.join(', ') } }
  )
}
