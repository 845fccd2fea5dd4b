import { createHash, randomBytes, randomInt } from 'node:crypto'

/** A random secret with a recognizable prefix (`hrt_...`). */
export function randomToken(prefix = '', bytes = 32): string {
  return `${prefix}${randomBytes(bytes).toString('base64url')}`
}

/** How single-use and refresh tokens are stored: SHA-256, hex. */
export function sha256(value: string): string {
  return createHash('sha256').update(value).digest('hex')
}

/**
 * An e-mail address in a rate-limit key: its digest, of fixed length. The
 * limiter's keys hold at most 255 characters, and an address may have 254
 * (a longer key was a 500 on sign-in and on resending the verification).
 */
export function addressKey(email: string): string {
  return sha256(email)
}

/** Unambiguous upper-case letters and digits (no 0/O, 1/I/L). */
const CODE_ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789'

/** A referral code: 10 characters, ~49 bits of randomness, easy to type. */
export function referralCode(length = 10): string {
  let code = ''
  for (let i = 0; i < length; i++) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)]
  return code
}
