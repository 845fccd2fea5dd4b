import { DateTime } from 'luxon'
import { hashPassword } from '#identity/services/password_hashing'
import { randomUUID } from 'node:crypto'
import limiter from '@adonisjs/limiter/services/main'
import db from '@adonisjs/lucid/services/db'
import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import { appUrl } from '#config/app'
import type { TierKey } from '#config/plans'
import { RateLimitExceededException, ValidationException } from '#core/exceptions/api_exceptions'
import User, { type Role } from '#identity/models/user'
import { isAdminEmail } from '#identity/services/admin_emails'
import { addressKey, referralCode, randomToken, sha256 } from '#identity/services/secure_tokens'
import { canonicalEmail, clientAddressHash } from '#identity/services/person_signals'
import { identityLimits } from '#config/identity'
import { sendMailInBackground } from '#identity/services/mailer'
import { registrationAttemptMail, verificationMail } from '#identity/mails/account_mails'
import { notify } from '#identity/services/notification_service'
import { grantMonthlyCredits } from '#credits/services/monthly_grant'

/** A taken username is a validation failure of that field (usernames are public). */
const USERNAME_TAKEN = 'That username is taken (field "username", rule "unique")'

/** Verification links are valid 24 hours. */
const VERIFICATION_TTL_HOURS = 24

const PG_UNIQUE_VIOLATION = '23505'

export interface RegistrationInput {
  email: string
  username: string
  password: string
  referralCode?: string | null
}

export interface NewAccountInput {
  email: string
  username: string
  /** Plain password, or an already computed hash (`passwordHash`). */
  password?: string
  passwordHash?: string
  referredById?: string | null
  /** The sign-up client address (kept only as a keyed hash). */
  signupIp?: string
  role?: Role
  tier?: TierKey
  verified?: boolean
}

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase()
}

/**
 * Messages about an address already registered go out at most this often,
 * so registration cannot be used to flood someone's mailbox.
 */
async function mayMail(email: string): Promise<boolean> {
  const response = await limiter
    .use({ requests: 3, duration: '1 hour' })
    .increment(`account-mail:${addressKey(email)}`)
  return response.consumed <= 3
}

function uniqueViolation(error: unknown): string | null {
  const err = error as { code?: string; constraint?: string }
  return err.code === PG_UNIQUE_VIOLATION ? (err.constraint ?? 'unknown') : null
}

/**
 * Inserts an account with a fresh referral code (retried on the rare
 * collision). Used by registration and by test helpers.
 */
export async function createAccount(
  input: NewAccountInput,
  trx?: TransactionClientContract
): Promise<User> {
  const passwordHash = input.passwordHash ?? (await hashPassword(input.password ?? randomToken()))
  for (let attempt = 0; ; attempt++) {
    try {
      return await User.create(
        {
          email: normalizeEmail(input.email),
          username: input.username,
          password: passwordHash,
          role: input.role ?? 'user',
          tier: input.tier ?? 'free',
          referralCode: referralCode(),
          referredById: input.referredById ?? null,
          emailCanonical: canonicalEmail(input.email),
          signupIpHash: input.signupIp ? clientAddressHash(input.signupIp) : null,
          walletAddress: null,
          emailVerifiedAt: input.verified ? DateTime.now() : null,
        },
        { client: trx }
      )
    } catch (error) {
      if (uniqueViolation(error)?.includes('referral_code') && attempt < 5) continue
      throw error
    }
  }
}

/** What one registration asked for: applied to the account only when its own link verifies it. */
export interface RegistrationValues {
  /** The registration's password hash. */
  passwordHash: string
  username: string
  referredById: string | null
}

/**
 * A new verification link. A registration's link carries that
 * registration's values (password hash, username, referrer), and each
 * registration of a still unverified address keeps its own link: whoever
 * verifies gets what they registered with, nothing of anyone else's. A
 * resend repeats the latest registration's values; it replaces the
 * earlier resent links. Answers the link and the username it greets.
 */
export async function issueVerificationLink(
  user: User,
  registration?: RegistrationValues
): Promise<{ link: string; username: string }> {
  const token = randomToken()
  const username = await db.transaction(async (trx) => {
    let values: {
      password_hash: string | null
      username: string | null
      referred_by_id: string | null
    } = {
      password_hash: registration?.passwordHash ?? null,
      username: registration?.username ?? null,
      referred_by_id: registration?.referredById ?? null,
    }
    if (!registration) {
      const latest = await trx
        .from('email_verification_tokens')
        .where('user_id', user.id)
        .whereNotNull('password_hash')
        .orderBy('created_at', 'desc')
        .first()
      values = {
        password_hash: latest?.password_hash ?? null,
        username: latest?.username ?? null,
        referred_by_id: latest?.referred_by_id ?? null,
      }
      await trx
        .from('email_verification_tokens')
        .where('user_id', user.id)
        .whereNull('used_at')
        .where('from_registration', false)
        .delete()
    }
    await trx.table('email_verification_tokens').insert({
      id: randomUUID(),
      user_id: user.id,
      token_hash: sha256(token),
      ...values,
      from_registration: Boolean(registration),
      expires_at: DateTime.now().plus({ hours: VERIFICATION_TTL_HOURS }).toJSDate(),
      used_at: null,
      created_at: new Date(),
    })
    return values.username ?? user.username
  })
  return { link: `${appUrl}/auth/verify-email/${token}`, username }
}

/** Mails a fresh verification link (registration, resend, staff resend from the console). */
export async function mailVerificationLink(user: User, registration?: RegistrationValues) {
  const { link, username } = await issueVerificationLink(user, registration)
  await sendMailInBackground(verificationMail(user.email, username, link))
}

/**
 * POST /auth/register. Answers the same whether or not the address was
 * free: a taken address gets a mail (a new verification link when still
 * unverified, a notice otherwise) instead of a second account, and both
 * paths hash the password so they take comparable time. A taken username
 * is 400 VALIDATION_ERROR naming the field, whatever the address (usernames
 * are public).
 */
export async function register(input: RegistrationInput, ip: string): Promise<void> {
  const email = normalizeEmail(input.email)
  // Counted before anything is looked up: the answer says nothing about the address.
  const perClient = await limiter
    .use({ requests: identityLimits.signupsPerClientPerDay, duration: '1 day' })
    .increment(`signup-ip:${ip}`)
  if (perClient.consumed > identityLimits.signupsPerClientPerDay) {
    throw RateLimitExceededException.retryAfter(
      'Too many sign-ups from this network today; try again tomorrow',
      perClient.availableIn
    )
  }

  // A name held by this very address's unverified registration is not taken for it: someone
  // who registered the address first (perhaps under this name) cannot keep its owner out.
  const holder = await User.findBy('username', input.username)
  if (holder && (holder.email !== email || holder.isVerified)) {
    throw new ValidationException(USERNAME_TAKEN)
  }

  const referrer = input.referralCode
    ? await User.findBy('referral_code', input.referralCode.trim().toUpperCase())
    : null

  const existing = await User.query().where('email', email).first()
  if (existing) {
    const passwordHash = await hashPassword(input.password)
    void answerTakenAddress(existing, {
      passwordHash,
      username: input.username,
      referredById: referrer?.id ?? null,
    })
    return
  }

  let user: User
  try {
    user = await createAccount({
      email,
      username: input.username,
      password: input.password,
      referredById: referrer?.id ?? null,
      signupIp: ip,
    })
  } catch (error) {
    const constraint = uniqueViolation(error)
    if (constraint?.includes('username')) throw new ValidationException(USERNAME_TAKEN)
    if (constraint?.includes('email')) return // registered concurrently: stay neutral
    throw error
  }
  void mailVerificationLink(user, {
    passwordHash: user.password,
    username: user.username,
    referredById: user.referredById,
  }).catch(() => {})
}

/**
 * A registration of an address that has an account: a verified one gets a
 * notice; an unverified one gets a link of its own carrying this
 * registration's values (the pending account's password, username and
 * referrer are not trusted until someone proves they own the address: the
 * link that verifies it sets them).
 */
async function answerTakenAddress(user: User, registration: RegistrationValues) {
  try {
    if (!(await mayMail(user.email))) return
    if (user.isVerified) {
      await sendMailInBackground(registrationAttemptMail(user.email, `${appUrl}/auth/login`))
    } else {
      await mailVerificationLink(user, registration)
    }
  } catch {
    // Background work: the client already has its (neutral) answer.
  }
}

/**
 * POST /auth/resend-verification: a new link for an unverified account;
 * nothing for an unknown or verified address. Throttled per address and per
 * client (429) whether or not the address exists.
 */
export async function resendVerification(emailInput: string, ip: string): Promise<void> {
  const email = normalizeEmail(emailInput)
  const perAddressLimit = identityLimits.verificationMailsPerAddressPerHour
  const perClientLimit = identityLimits.verificationMailsPerClientPerHour
  const perAddress = await limiter
    .use({ requests: perAddressLimit, duration: '1 hour' })
    .increment(`resend-verification:${addressKey(email)}`)
  const perClient = await limiter
    .use({ requests: perClientLimit, duration: '1 hour' })
    .increment(`resend-verification-ip:${ip}`)
  const over = [
    perAddress.consumed > perAddressLimit && perAddress,
    perClient.consumed > perClientLimit && perClient,
  ].filter((response) => response !== false)
  if (over.length > 0) {
    throw RateLimitExceededException.retryAfter(
      'Too many verification mails requested; try again later',
      Math.max(...over.map((response) => response.availableIn))
    )
  }

  const user = await User.query().where('email', email).first()
  if (user && !user.isVerified && !user.disabledAt) {
    void mailVerificationLink(user).catch(() => {})
  }
}

export type VerificationOutcome = 'verified' | 'already_verified'

/**
 * GET /auth/verify-email/:token. The token works once within 24 hours. On
 * first use, in one transaction: the address is verified, ADMIN_EMAILS
 * addresses become admin, the tier's monthly AI Credits are granted and a
 * welcome notification is stored. Following the same link again after
 * success (mail scanners prefetch links) says "already verified" and
 * changes nothing.
 */
export async function verifyEmail(token: string): Promise<VerificationOutcome> {
  const invalid = new ValidationException('The verification link is invalid or has expired')
  if (!/^[\w-]{20,100}$/.test(token)) throw invalid

  const row = await db.from('email_verification_tokens').where('token_hash', sha256(token)).first()
  if (!row) throw invalid

  if (row.used_at) {
    const owner = await User.find(row.user_id)
    if (owner?.isVerified) return 'already_verified'
    throw invalid
  }
  if (new Date(row.expires_at).getTime() <= Date.now()) throw invalid

  return db.transaction(async (trx) => {
    const claimed = await trx
      .from('email_verification_tokens')
      .where('id', row.id)
      .whereNull('used_at')
      .update({ used_at: new Date() })
      .returning('id')
    if (claimed.length === 0) return 'already_verified'

    const user = await User.query({ client: trx }).where('id', row.user_id).forUpdate().first()
    if (!user) throw invalid
    if (user.isVerified) return 'already_verified'

    user.emailVerifiedAt = DateTime.now()
    // The values of the registration this link was sent for: the owner of the mailbox's.
    if (row.password_hash) user.password = row.password_hash
    if (row.username) {
      if (row.username !== user.username) {
        const taken = await User.query({ client: trx })
          .where('username', row.username)
          .whereNot('id', user.id)
          .first()
        if (taken) {
          throw new ValidationException(
            `username: "${row.username}" was taken since you registered; register again with another username`
          )
        }
        user.username = row.username
      }
      user.referredById = row.referred_by_id === user.id ? null : (row.referred_by_id ?? null)
    }
    if (isAdminEmail(user.email)) user.role = 'admin'
    await user.useTransaction(trx).save()

    const grant = await grantMonthlyCredits(user, { trx })
    await notify(
      user.id,
      {
        type: 'welcome',
        title: 'Welcome to Agent Host',
        body: grant?.applied
          ? 'Your e-mail address is verified and your monthly AI Credits have been added.'
          : 'Your e-mail address is verified.',
      },
      { trx }
    )
    return 'verified'
  })
}

/** `node ace user:role`: sets the role of the account with that address. */
export async function setRole(emailInput: string, role: Role): Promise<User | null> {
  const user = await User.query().where('email', normalizeEmail(emailInput)).first()
  if (!user) return null
  user.role = role
  await user.save()
  return user
}
