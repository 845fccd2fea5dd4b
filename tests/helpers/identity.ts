/**
 * Fast account fixtures for functional tests of every area: direct service
 * and database calls, no HTTP round trips.
 *
 *   const user = await createUser({ tier: 'pro', credits: 1000 })
 *   client.get('/agents').bearerToken(jwtFor(user))
 *   client.get('/api/v1/me').bearerToken(await apiKeyFor(user))
 */
import { randomBytes } from 'node:crypto'
import hash from '@adonisjs/core/services/hash'
import type { TierKey } from '#config/plans'
import User, { type Role } from '#identity/models/user'
import { createAccount } from '#identity/services/account_service'
import { issueApiKey } from '#identity/services/api_key_service'
import { signJwt } from '#identity/services/jwt'
import creditLedger from '#credits/services/credit_ledger'
import { answersWritten } from '#tests/helpers/answers_written'

/** The password of every account made by createUser (unless given). */
export const TEST_PASSWORD = 'correct-horse-battery'

let defaultHash: Promise<string> | undefined

export function uniqueSuffix(): string {
  return randomBytes(5).toString('hex')
}

export function uniqueEmail(tag = 'user'): string {
  return `${tag}-${Date.now().toString(36)}-${uniqueSuffix()}@example.test`
}

/** A valid username (a-z 0-9 _, at most 30 characters). */
export function uniqueUsername(tag = 'u'): string {
  return `${tag
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, '')
    .slice(0, 12)}_${uniqueSuffix()}`
}

export interface CreateUserOptions {
  email?: string
  username?: string
  password?: string
  /** Default true: most tests need a verified account. */
  verified?: boolean
  tier?: TierKey
  role?: Role
  /** Starting AI Credit balance, written through the ledger (kind `grant`). */
  credits?: number
  referredById?: string | null
}

export async function createUser(options: CreateUserOptions = {}): Promise<User> {
  const passwordHash = options.password
    ? await hash.make(options.password)
    : await (defaultHash ??= hash.make(TEST_PASSWORD))
  const user = await createAccount({
    email: options.email ?? uniqueEmail(),
    username: options.username ?? uniqueUsername(),
    passwordHash,
    verified: options.verified ?? true,
    tier: options.tier,
    role: options.role,
    referredById: options.referredById ?? null,
  })
  if (options.credits && options.credits > 0) {
    const { balance } = await creditLedger.credit(user.id, options.credits, {
      kind: 'grant',
      reason: 'test fixture',
    })
    user.aiCreditsBalance = balance
  }
  return user
}

/** A dashboard JWT for the user (7 days). */
export function jwtFor(user: { id: string }): string {
  return signJwt(user.id).token
}

/** A new `hk_` API key for the user. */
export async function apiKeyFor(user: User, label = 'test'): Promise<string> {
  return issueApiKey(user, label)
}

/** Reloads the user from the database (balances, roles after HTTP calls). */
export async function reloadUser(user: { id: string }): Promise<User> {
  await answersWritten()
  return User.findOrFail(user.id)
}

/** The user's AI Credit balance as stored now. */
export async function creditsOf(user: { id: string }): Promise<number> {
  const fresh = await reloadUser(user)
  return fresh.aiCreditsBalance
}
