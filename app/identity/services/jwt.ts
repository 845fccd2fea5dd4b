import {
  createHmac,
  createSecretKey,
  hkdfSync,
  randomUUID,
  timingSafeEqual,
  type KeyObject,
} from 'node:crypto'
import { appKey } from '#config/app'

/** JWT lifetime (spec: 7 days), as written in answers and in seconds. */
export const JWT_EXPIRES_IN = '7d'
export const JWT_TTL_SECONDS = 7 * 24 * 60 * 60

/** Audience claim: these tokens are for the dashboard API only. */
const AUDIENCE = 'dashboard'

export interface JwtClaims {
  sub: string
  aud: string
  iat: number
  exp: number
  jti: string
  /** The account's token version when issued; a JWT of an older version is refused. */
  ver: number
}

let signingKey: KeyObject | undefined

/**
 * HS256 key derived from APP_KEY with HKDF, so the JWT key is never the raw
 * application key that also encrypts stored secrets and signs cookies. A
 * KeyObject, made once: every request's verification would otherwise import
 * the raw bytes again.
 */
function key(): KeyObject {
  signingKey ??= createSecretKey(
    Buffer.from(hkdfSync('sha256', appKey.release(), 'agent-host', 'jwt-hs256', 32))
  )
  return signingKey
}

const HEADER = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url')

function sign(input: string): Buffer {
  return createHmac('sha256', key()).update(input).digest()
}

/** Signs a dashboard JWT for a user, valid for 7 days. */
export function signJwt(
  userId: string,
  options: { now?: Date; version?: number } = {}
): { token: string; expiresAt: Date } {
  const now = options.now ?? new Date()
  const iat = Math.floor(now.getTime() / 1000)
  const claims: JwtClaims = {
    sub: userId,
    aud: AUDIENCE,
    iat,
    exp: iat + JWT_TTL_SECONDS,
    jti: randomUUID(),
    ver: options.version ?? 0,
  }
  const body = `${HEADER}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`
  return {
    token: `${body}.${sign(body).toString('base64url')}`,
    expiresAt: new Date(claims.exp * 1000),
  }
}

function parseJson(segment: string): any {
  try {
    return JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'))
  } catch {
    return undefined
  }
}

/**
 * Checks the header (HS256 only: `none` and other algorithms are refused),
 * the signature and the expiry. Returns the claims, or null for any token
 * that is not one of ours and still valid. Whether the user still exists and
 * may sign in is checked by the caller.
 */
export function verifyJwt(token: string, now: Date = new Date()): JwtClaims | null {
  const parts = token.split('.')
  if (parts.length !== 3) return null
  const [header, payload, signature] = parts

  const parsedHeader = parseJson(header)
  if (!parsedHeader || parsedHeader.alg !== 'HS256') return null

  const expected = sign(`${header}.${payload}`)
  const given = Buffer.from(signature, 'base64url')
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null

  const claims = parseJson(payload)
  if (!claims || typeof claims !== 'object') return null
  if (typeof claims.sub !== 'string' || claims.aud !== AUDIENCE) return null
  if (typeof claims.exp !== 'number' || typeof claims.iat !== 'number') return null
  if (claims.exp * 1000 <= now.getTime()) return null
  return claims as JwtClaims
}
