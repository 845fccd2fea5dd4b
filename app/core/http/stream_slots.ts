import { RateLimitExceededException } from '#core/exceptions/api_exceptions'

/**
 * Long-lived streams (chat SSE, live logs) an account may hold open at
 * once on this instance: each holds a socket and, for logs, a file
 * follower. Beyond the limit: 429 RATE_LIMIT_EXCEEDED with Retry-After.
 */
const open = new Map<string, number>()

export const STREAM_LIMITS = {
  /** Chat answers streamed at once per account. */
  chat: 10,
  /** Live log streams per account. */
  logs: 5,
} as const

export type StreamKind = keyof typeof STREAM_LIMITS

/** Takes a slot or throws the 429; returns the release (idempotent). */
export function takeStreamSlot(kind: StreamKind, accountId: string): () => void {
  const key = `${kind}:${accountId}`
  const count = open.get(key) ?? 0
  if (count >= STREAM_LIMITS[kind]) {
    throw RateLimitExceededException.retryAfter(
      `At most ${STREAM_LIMITS[kind]} ${kind === 'chat' ? 'chat streams' : 'live log streams'} open at once per account`,
      5
    )
  }
  open.set(key, count + 1)
  let released = false
  return () => {
    if (released) return
    released = true
    const left = (open.get(key) ?? 1) - 1
    if (left > 0) open.set(key, left)
    else open.delete(key)
  }
}
