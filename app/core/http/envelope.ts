/**
 * Success envelope. Controllers return plain data; the envelope middleware
 * wraps JSON bodies, so this is only needed where a body is written by hand.
 */
const enveloped = new WeakSet<object>()

export function ok<T>(data: T) {
  const body = { success: true as const, data }
  enveloped.add(body)
  return body
}

export function isEnveloped(body: unknown): boolean {
  return typeof body === 'object' && body !== null && enveloped.has(body)
}
