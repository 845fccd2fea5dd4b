import { DateTime } from 'luxon'
import { afterDelete, afterSave, beforeCreate, beforeSave, column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'
import { type TierKey, tierPlan } from '#config/plans'
import { ApiKeyTokensProvider } from '#identity/services/api_key_tokens_provider'
import { authCache } from '#identity/services/auth_cache'

export const roles = ['user', 'support', 'operator', 'admin'] as const
export type Role = (typeof roles)[number]

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (roles as readonly string[]).includes(value)
}

/**
 * The tier an account enjoys now: a paid tier whose subscription has run
 * out counts as free (lifetime tiers have no expiry). Shared by the model
 * and the hot path that reads the plain users row.
 */
export function effectiveTier(tier: TierKey, subscriptionExpiresAtMs: number | null): TierKey {
  if (tier === 'free') return 'free'
  if (tierPlan(tier).lifetime) return tier
  if (subscriptionExpiresAtMs !== null && subscriptionExpiresAtMs <= Date.now()) return 'free'
  return tier
}

/** effectiveTier of a raw users row (as the auth cache holds it). */
export function effectiveTierOfRow(row: Readonly<Record<string, unknown>>): TierKey {
  const expires = row.subscription_expires_at as Date | string | null | undefined
  return effectiveTier(row.tier as TierKey, expires ? new Date(expires).getTime() : null)
}

/**
 * An account. `email` is kept lower-case; `password` holds the scrypt hash
 * (hashing happens in the account service, never here, so the model never
 * sees a plain password by accident). `aiCreditsBalance` is changed only by
 * the credits area: the credit ledger, inside the transaction that writes the
 * ledger entry, and the credit holds of hosted model requests
 * (`#credits/services/credit_holds`).
 */
export default class User extends UuidModel {
  /** API keys: the auth package's access tokens, `hk_` prefix, stored hashed. */
  static apiKeys = new ApiKeyTokensProvider(User)

  @column()
  declare email: string

  @column()
  declare username: string

  @column({ serializeAs: null })
  declare password: string

  @column.dateTime()
  declare emailVerifiedAt: DateTime | null

  @column()
  declare role: Role

  @column()
  declare tier: TierKey

  @column()
  declare referralCode: string

  @column()
  declare referredById: string | null

  /** The address with aliases folded (person_signals.canonicalEmail). */
  @column({ serializeAs: null })
  declare emailCanonical: string | null

  /** Keyed hash of the sign-up client address. */
  @column({ serializeAs: null })
  declare signupIpHash: string | null

  @column()
  declare walletAddress: string | null

  @column()
  declare aiCreditsBalance: number

  @column.dateTime()
  declare subscriptionExpiresAt: DateTime | null

  /** Set by staff to lock the account: every credential of it stops working. */
  @column.dateTime()
  declare disabledAt: DateTime | null

  /** Version of the account's JWTs; bumped to end them all at once (sign-out). */
  @column({ serializeAs: null })
  declare tokenVersion: number

  /** Staff two-factor sign-in (console): encrypted TOTP secret, set once confirmed. */
  @column({ serializeAs: null })
  declare totpSecretEncrypted: string | null

  @column.dateTime()
  declare totpEnabledAt: DateTime | null

  /** SHA-256 hashes of the recovery codes not used yet. */
  @column({ serializeAs: null, prepare: (value: string[]) => JSON.stringify(value ?? []) })
  declare totpRecoveryHashes: string[]

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime

  @column.dateTime({ autoCreate: true, autoUpdate: true })
  declare updatedAt: DateTime

  @beforeCreate()
  static assignId(user: User) {
    if (!user.role) user.role = 'user'
    if (!user.tier) user.tier = 'free'
    if (user.aiCreditsBalance === undefined) user.aiCreditsBalance = 0
  }

  @beforeSave()
  static normalizeEmail(user: User) {
    if (user.$dirty.email) user.email = user.email.trim().toLowerCase()
  }

  /** This instance sees its own changes at once (other instances via NOTIFY). */
  @afterSave()
  @afterDelete()
  static forgetCached(user: User) {
    authCache.forgetUser(user.id, user.$trx)
  }

  get isVerified(): boolean {
    return this.emailVerifiedAt !== null
  }

  /**
   * The tier the account enjoys now: a paid tier whose subscription has run
   * out counts as free (lifetime tiers have no expiry).
   */
  get effectiveTier(): TierKey {
    return effectiveTier(this.tier, this.subscriptionExpiresAt?.toMillis() ?? null)
  }
}
