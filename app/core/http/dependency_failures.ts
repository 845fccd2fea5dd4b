import { ApiException, ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import { isDatabaseUnavailable } from '#core/database/database_errors'

/**
 * Failures of something the service depends on (its database, its disk)
 * rather than of the request or of our code: each is answered with a 503
 * envelope saying what is wrong, and logged once per interval with a count
 * instead of once per request with a stack.
 */
export interface DependencyFailure {
  kind: 'database_unavailable' | 'storage_full'
  answer: ServiceUnavailableException
}

/** Seconds a client should wait before retrying. */
const RETRY_AFTER_SECS = 5
const STORAGE_FULL_CODES = new Set(['ENOSPC', 'EDQUOT'])

function isStorageFull(error: unknown): boolean {
  const err = error as { code?: unknown; cause?: unknown } | null
  if (!err || typeof err !== 'object') return false
  if (typeof err.code === 'string' && STORAGE_FULL_CODES.has(err.code)) return true
  return err.cause !== undefined && err.cause !== error && isStorageFull(err.cause)
}

export function dependencyFailure(error: unknown): DependencyFailure | undefined {
  if (error instanceof ApiException) return undefined
  const headers = { 'Retry-After': String(RETRY_AFTER_SECS) }
  if (isDatabaseUnavailable(error)) {
    return {
      kind: 'database_unavailable',
      answer: new ServiceUnavailableException(
        'The database is unavailable right now; please retry in a few seconds',
        { cause: error, headers }
      ),
    }
  }
  if (isStorageFull(error)) {
    return {
      kind: 'storage_full',
      answer: new ServiceUnavailableException(
        "The service's storage is full; nothing was written. Please retry later",
        { cause: error, headers }
      ),
    }
  }
  return undefined
}

const LOG_EVERY_MS = 10_000
const lastLoggedAt = new Map<DependencyFailure['kind'], number>()
const failuresSinceLog = new Map<DependencyFailure['kind'], number>()

/** Calls `log` at most once per 10 s per kind, with the failures counted since. */
export function logDependencyFailure(
  failure: DependencyFailure,
  raw: unknown,
  log: (fields: Record<string, unknown>, message: string) => void
) {
  const count = (failuresSinceLog.get(failure.kind) ?? 0) + 1
  failuresSinceLog.set(failure.kind, count)
  if (Date.now() - (lastLoggedAt.get(failure.kind) ?? 0) < LOG_EVERY_MS) return
  log(
    { reason: (raw as Error)?.message ?? String(raw), failedRequests: count },
    `${failure.kind.replace('_', ' ')}: answering 503`
  )
  lastLoggedAt.set(failure.kind, Date.now())
  failuresSinceLog.set(failure.kind, 0)
}
