/**
 * Masks credentials in every log line: headers (Authorization, Cookie),
 * passwords, keys, tokens, secrets and signatures, at any depth.
 *
 * This runs as pino's `formatters.log`, i.e. once per line actually written,
 * instead of pino's `redact` option, which is re-compiled for every child
 * logger and so cost a few microseconds on every request (each request gets
 * a child logger carrying its request id).
 */
const SECRET_KEY =
  /^(authorization|cookie|set-cookie|proxy-authorization|x-api-key|password|password_?confirmation|signature|tx_?signature|private_?key|secret)$|(key|token|secret|password)$/i

export const REDACTED = '[redacted]'
const MAX_DEPTH = 8

function redactValue(value: unknown, depth: number, seen: WeakSet<object>): unknown {
  if (typeof value !== 'object' || value === null) return value
  if (depth > MAX_DEPTH || seen.has(value)) return '[truncated]'
  seen.add(value)

  if (Array.isArray(value)) return value.map((item) => redactValue(item, depth + 1, seen))
  // Errors are left to pino's err serializer, which runs after this formatter.
  if (value instanceof Error || value instanceof Date || Buffer.isBuffer(value)) return value

  const copy: Record<string, unknown> = {}
  for (const [key, inner] of Object.entries(value)) {
    copy[key] =
      SECRET_KEY.test(key) && inner !== null && inner !== undefined
        ? REDACTED
        : redactValue(inner, depth + 1, seen)
  }
  return copy
}

/** Returns a copy of a log object with every secret-looking field masked. */
export function redactSecrets<T extends Record<string, unknown>>(object: T): T {
  return redactValue(object, 0, new WeakSet()) as T
}
