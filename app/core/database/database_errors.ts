/**
 * SQLSTATE classes and codes that mean "the database is not there right
 * now" rather than "this query is wrong": 08 connection exceptions, 57P01-03
 * (shut down by an administrator, crashed, starting up), 53300 too many
 * connections.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300'])
const UNAVAILABLE_NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EPIPE',
])
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'Client has encountered a connection error',
  'timeout exceeded when trying to connect',
]

/** True when the error says the database is unreachable, restarting or full of connections. */
export function isDatabaseUnavailable(error: unknown): boolean {
  const err = error as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown }
  if (!err || typeof err !== 'object') return false
  const code = typeof err.code === 'string' ? err.code : ''
  if (UNAVAILABLE_NETWORK_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code)) return true
  if (code.startsWith('08') && code.length === 5) return true
  // Knex: no connection could be taken from the pool in time.
  if (err.name === 'KnexTimeoutError') return true
  const message = typeof err.message === 'string' ? err.message : ''
  if (UNAVAILABLE_MESSAGES.some((text) => message.includes(text))) return true
  // AggregateError of a failed connect to every address, or a wrapped cause.
  const inner = (error as { errors?: unknown[] }).errors
  if (Array.isArray(inner) && inner.some(isDatabaseUnavailable)) return true
  return err.cause !== undefined && err.cause !== error && isDatabaseUnavailable(err.cause)
}
