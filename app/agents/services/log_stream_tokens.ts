import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto'
import { appKey } from '#config/app'

/**
 * Short-lived signed tokens for `GET /agents/:id/logs?stream=true&token=...`:
 * browsers' EventSource cannot send an Authorization header, so the owner
 * first asks `POST /agents/:id/logs/token` (JWT) and opens the stream with
 * the token in the query. A token names one agent and its owner, is valid
 * for 5 minutes and only for that agent's logs; it is an HMAC over
 * `agentId.userId.expiry` with a key derived from APP_KEY.
 */
export const LOG_TOKEN_TTL_SECONDS = 5 * 60
const PREFIX = 'lgt_'

let signingKey: Buffer | undefined

function key(): Buffer {
  signingKey ??= Buffer.from(
    hkdfSync('sha256', appKey.release(), 'agent-host', 'agent-logs-token', 32)
  )
  return signingKey
}

function sign(payload: string): string {
  return createHmac('sha256', key()).update(payload).digest('base64url')
}

export function issueLogStreamToken(
  agentId: string,
  userId: string,
  now: Date = new Date()
): { token: string; expiresAt: Date; expiresIn: number } {
  const expiry = Math.floor(now.getTime() / 1000) + LOG_TOKEN_TTL_SECONDS
  const payload = Buffer.from(JSON.stringify([agentId, userId, expiry])).toString('base64url')
  return {
    token: `${PREFIX}${payload}.${sign(payload)}`,
    expiresAt: new Date(expiry * 1000),
    expiresIn: LOG_TOKEN_TTL_SECONDS,
  }
}

/** The owner's id when `token` is a valid, unexpired token for `agentId`; else null. */
export function verifyLogStreamToken(
  token: unknown,
  agentId: string,
  now: Date = new Date()
): { userId: string } | null {
  if (typeof token !== 'string' || !token.startsWith(PREFIX) || token.length > 512) return null
  const [payload, signature, extra] = token.slice(PREFIX.length).split('.')
  if (!payload || !signature || extra !== undefined) return null
  const expected = Buffer.from(sign(payload))
  const given = Buffer.from(signature)
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null
  try {
    const [tokenAgent, userId, expiry] = JSON.parse(Buffer.from(payload, 'base64url').toString())
    if (tokenAgent !== agentId || typeof userId !== 'string') return null
    if (typeof expiry !== 'number' || expiry * 1000 <= now.getTime()) return null
    return { userId }
  } catch {
    return null
  }
}
