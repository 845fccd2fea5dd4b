import { randomBytes } from 'node:crypto'
import encryption from '@adonisjs/core/services/encryption'
import { Secret, TOTP } from 'otpauth'
import QRCode from 'qrcode'
import { sha256 } from '#identity/services/secure_tokens'
import type User from '#identity/models/user'

/**
 * Staff two-factor sign-in with time-based one-time passwords (RFC 6238,
 * the 6-digit 30-second codes every authenticator app reads) through the
 * maintained `otpauth` library, and single-use recovery codes kept as
 * SHA-256 hashes (they are 80-bit random, so a fast hash is enough).
 */
const ISSUER = 'Agent Host console'
const RECOVERY_CODES = 10

function totpFor(email: string, base32: string): TOTP {
  return new TOTP({
    issuer: ISSUER,
    label: email,
    algorithm: 'SHA1',
    digits: 6,
    period: 30,
    secret: Secret.fromBase32(base32),
  })
}

export function newTotpSecret(): string {
  return new Secret({ size: 20 }).base32
}

/** What the setup page shows: the otpauth URI as a QR code and the secret to type in. */
export async function provisioning(email: string, base32: string) {
  const uri = totpFor(email, base32).toString()
  return { uri, qrCode: await QRCode.toDataURL(uri, { margin: 1, width: 220 }), secret: base32 }
}

/** Accepts the current code and its neighbours (clock drift of 30 s either way). */
export function codeMatches(email: string, base32: string, code: string): boolean {
  const token = code.replace(/\s+/g, '')
  if (!/^\d{6}$/.test(token)) return false
  return totpFor(email, base32).validate({ token, window: 1 }) !== null
}

export function sealSecret(base32: string): string {
  return encryption.encrypt(base32)
}

export function openSecret(user: User): string | null {
  if (!user.totpSecretEncrypted) return null
  return encryption.decrypt<string>(user.totpSecretEncrypted)
}

/** Fresh recovery codes (shown once) and their hashes (stored). */
export function newRecoveryCodes(): { codes: string[]; hashes: string[] } {
  const codes = Array.from({ length: RECOVERY_CODES }, () => {
    const hex = randomBytes(10).toString('hex')
    return `${hex.slice(0, 5)}-${hex.slice(5, 10)}-${hex.slice(10, 15)}-${hex.slice(15)}`
  })
  return { codes, hashes: codes.map((code) => sha256(code)) }
}

/** The remaining hashes when `code` is an unused recovery code, else null. */
export function consumeRecoveryCode(user: User, code: string): string[] | null {
  const hashed = sha256(code.trim().toLowerCase())
  const hashes = user.totpRecoveryHashes ?? []
  if (!hashes.includes(hashed)) return null
  return hashes.filter((value) => value !== hashed)
}

/** A six-digit code or a recovery code, checked against the user's stored secret. */
export function verifySecondFactor(
  user: User,
  code: string
): { ok: false } | { ok: true; remainingRecovery?: string[] } {
  const secret = openSecret(user)
  if (!secret) return { ok: false }
  if (codeMatches(user.email, secret, code)) return { ok: true }
  const remaining = consumeRecoveryCode(user, code)
  return remaining ? { ok: true, remainingRecovery: remaining } : { ok: false }
}
