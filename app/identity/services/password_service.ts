import { randomUUID } from 'node:crypto'
import { hashPassword, verifyPassword } from '#identity/services/password_hashing'
import db from '@adonisjs/lucid/services/db'
import limiter from '@adonisjs/limiter/services/main'
import { DateTime } from 'luxon'
import { appUrl } from '#config/app'
import { RateLimitExceededException, ValidationException } from '#core/exceptions/api_exceptions'
import User from '#identity/models/user'
import { passwordResetMail } from '#identity/mails/account_mails'
import { normalizeEmail } from '#identity/services/account_service'
import { sendMailInBackground } from '#identity/services/mailer'
import { addressKey, randomToken, sha256 } from '#identity/services/secure_tokens'
import { revokeAllApiKeys } from '#identity/services/api_key_service'
import { endJwts, issueSession } from '#identity/services/session_service'

/**
 * Password change and reset (docs/accounts.md). Both end every session of
 * the account: refresh tokens revoked, JWTs refused (token version). A
 * reset also revokes every API key: it means the password may have been
 * stolen, and keys made with it must die. A change keeps the keys: its
 * caller proved the current password and is signed in to review them.
 */
const RESET_TTL_MINUTES = 30
const RESET_MAILS_PER_ADDRESS = 3
const RESET_REQUESTS_PER_CLIENT = 20

async function endSessions(user: User) {
  await db
    .from('refresh_tokens')
    .where('user_id', user.id)
    .whereNull('revoked_at')
    .update({ revoked_at: new Date() })
  await endJwts(user.id)
}

/** POST /auth/password/change: the current password proves it; answers a new session. */
export async function changePassword(user: User, currentPassword: string, newPassword: string) {
  if (!(await verifyPassword(user.password, currentPassword))) {
    throw new ValidationException('currentPassword: the current password is wrong')
  }
  user.password = await hashPassword(newPassword)
  await user.save()
  await endSessions(user)
  const fresh = await User.findOrFail(user.id)
  const { tokens } = await issueSession(fresh)
  return tokens
}

/**
 * POST /auth/password/forgot: the same answer for every address; a
 * verified account gets a reset link (hashed, 30 minutes, single use).
 */
export async function forgotPassword(emailInput: string, ip: string): Promise<void> {
  const email = normalizeEmail(emailInput)
  const perClient = await limiter
    .use({ requests: RESET_REQUESTS_PER_CLIENT, duration: '1 hour' })
    .increment(`password-forgot-ip:${ip}`)
  if (perClient.remaining < 0) {
    throw RateLimitExceededException.retryAfter(
      'Too many reset requests; try again later',
      perClient.availableIn
    )
  }
  const user = await User.query().where('email', email).first()
  if (!user || !user.isVerified || user.disabledAt) return
  const perAddress = await limiter
    .use({ requests: RESET_MAILS_PER_ADDRESS, duration: '1 hour' })
    .increment(`password-forgot:${addressKey(email)}`)
  if (perAddress.remaining < 0) return
  const token = randomToken()
  await db.table('password_reset_tokens').insert({
    id: randomUUID(),
    user_id: user.id,
    token_hash: sha256(token),
    expires_at: DateTime.now().plus({ minutes: RESET_TTL_MINUTES }).toJSDate(),
  })
  await sendMailInBackground(
    passwordResetMail(user.email, `${appUrl}/auth/password/reset?token=${token}`)
  )
}

/** POST /auth/password/reset: a valid link sets the password once and ends every session. */
export async function resetPassword(token: string, password: string): Promise<void> {
  const invalid = new ValidationException('token: the reset link is invalid, used or expired')
  const claimed = await db
    .from('password_reset_tokens')
    .where('token_hash', sha256(token))
    .whereNull('used_at')
    .where('expires_at', '>', new Date())
    .update({ used_at: new Date() })
    .returning('user_id')
  if (claimed.length === 0) throw invalid
  const user = await User.find(claimed[0].user_id)
  if (!user || user.disabledAt) throw invalid
  user.password = await hashPassword(password)
  await user.save()
  // Other links sent before are void too.
  await db
    .from('password_reset_tokens')
    .where('user_id', user.id)
    .whereNull('used_at')
    .update({ used_at: new Date() })
  await endSessions(user)
  await revokeAllApiKeys(user.id)
}
