import { requiresCredential } from '#core/openapi/route_security'
import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import type { Authenticators } from '@adonisjs/auth/types'
import { AuthRequiredException } from '#core/exceptions/api_exceptions'
import { BearerGuard, authenticatedGuard } from '#identity/guards/bearer_guard'
import { accountKey, afterReply } from '#core/http/after_reply'

type GuardName = keyof Authenticators

/**
 * Authenticates with the first guard that accepts the request, else throws
 * 401 AUTH_REQUIRED with the reason the last guard found (missing, invalid,
 * or a credential of the other kind). `checkUsing` rather than
 * `authenticateUsing`: the latter builds the user model at once, which the
 * /api/v1 hot path does not need.
 */
async function authenticateOrFail(ctx: HttpContext, guards: GuardName[]) {
  if (await ctx.auth.checkUsing(guards)) return
  const guard = ctx.auth.use(guards[guards.length - 1])
  throw (guard instanceof BearerGuard && guard.failure) || new AuthRequiredException()
}

/**
 * The account's own writes still finishing after an answer (after_reply.ts)
 * end before its next request reads anything: what it sees includes them,
 * its balance in the identity too (read again then).
 */
async function authenticateAfterOwnWrites(ctx: HttpContext, guards: GuardName[]) {
  await authenticateOrFail(ctx, guards)
  const guard = authenticatedGuard(ctx)
  if (!guard?.identity) return
  const writes = afterReply.pending(accountKey(String(guard.identity.row.id)))
  if (!writes) return
  await writes
  await guard.reauthenticate()
}

const API_GUARDS: GuardName[] = ['api']

/**
 * `auth({ guards: ['api'] })` as a plain route middleware function: the
 * router calls it directly instead of resolving a class from the container
 * on every request (/api/v1 is the throughput-sensitive API).
 */
function authenticateApiKey(ctx: HttpContext, next: NextFn) {
  return authenticateAfterOwnWrites(ctx, API_GUARDS).then(next)
}

export const apiKeyAuth = requiresCredential(authenticateApiKey)

/**
 * The same for an agent turn's route: it does not wait for the account's
 * earlier writes here but where the turn reads them (the agent's history,
 * a hold the balance could not cover), so a conversation's next message
 * overlaps the last one's writes.
 */
export const apiKeyAuthForTurns = requiresCredential((ctx: HttpContext, next: NextFn) =>
  authenticateOrFail(ctx, API_GUARDS).then(next)
)

/**
 * `middleware.auth({ guards: ['jwt'] })` on dashboard routes,
 * `middleware.auth({ guards: ['api'] })` on /api/v1. A failure is 401
 * AUTH_REQUIRED with the reason the guard found (missing, invalid, or a
 * credential of the other kind).
 */
export default class AuthMiddleware {
  async handle(ctx: HttpContext, next: NextFn, options: { guards?: GuardName[] } = {}) {
    await authenticateAfterOwnWrites(ctx, options.guards ?? ['jwt'])
    return next()
  }
}
