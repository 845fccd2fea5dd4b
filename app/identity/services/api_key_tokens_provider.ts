import { isUuid } from '#core/http/ids'
import { createHash } from 'node:crypto'
import { DateTime } from 'luxon'
import type { Secret } from '@adonisjs/core/helpers'
import type { LucidModel } from '@adonisjs/lucid/types/model'
import { AccessToken, DbAccessTokensProvider } from '@adonisjs/auth/access_tokens'
import type { AccessTokenDbColumns } from '@adonisjs/auth/types/access_tokens'
import { authCache, type CachedApiKey } from '#identity/services/auth_cache'

export const API_KEY_PREFIX = 'hk_'
export const API_KEYS_TABLE = 'api_keys'
const API_KEY_TYPE = 'api_key'

/** `last_used_at` is written at most this often per key (not on every call). */
const LAST_USED_RESOLUTION_MS = 5 * 60 * 1000

/** A verified key together with the raw users row it belongs to (one query). */
export interface VerifiedApiKey {
  keyId: string
  /** The api_keys columns (possibly the cached row: never mutate it). */
  columns: Record<string, unknown>
  userRow: Record<string, unknown>
}

/** Most recent successful verifications remembered (see `#verified`). */
const MAX_VERIFIED = 10_000

function tokenDigest(value: string): string {
  return createHash('sha256').update(value).digest('base64url')
}

function isExpired(columns: Record<string, unknown>): boolean {
  const expiresAt = columns.expires_at as Date | string | null | undefined
  return !!expiresAt && new Date(expiresAt).getTime() < Date.now()
}

/**
 * The auth package's database access-token provider for API keys (`hk_`,
 * SHA-256 hashed), with verification reshaped for the hot path of /api/v1:
 * one query reads the key and its user, the identifier is checked to be a
 * UUID before it reaches PostgreSQL, and `last_used_at` is debounced instead
 * of written on every request.
 */
export class ApiKeyTokensProvider<Model extends LucidModel> extends DbAccessTokensProvider<Model> {
  constructor(tokenableModel: Model) {
    super({
      tokenableModel,
      table: API_KEYS_TABLE,
      type: API_KEY_TYPE,
      prefix: API_KEY_PREFIX,
      tokenSecretLength: 40,
    })
  }

  /** Short, non-secret form of a key: prefix plus the start of its encoded id. */
  static displayPrefix(id: string): string {
    return `${API_KEY_PREFIX}${Buffer.from(id).toString('base64url').slice(0, 8)}`
  }

  /**
   * Successful verifications by SHA-256 of the full token, each with the
   * cached key entry it was checked against. A hit is valid only while that
   * very entry is still the cached one: any change or deletion of the key
   * (revocation included, from any instance via NOTIFY) evicts it, and a
   * re-read stores a new entry, so a remembered token is verified again
   * against the row as it is now. Skips decoding, building an AccessToken
   * and comparing hashes on every /api/v1 request.
   */
  #verified = new Map<string, CachedApiKey>()

  async verifyWithUser(tokenValue: Secret<string>): Promise<VerifiedApiKey | null> {
    const fullToken = tokenValue.release()
    const digest = tokenDigest(fullToken)
    const remembered = this.#verified.get(digest)
    if (remembered) {
      const keyId = String(remembered.columns.id)
      const userRow = authCache.apiKey(keyId) === remembered && authCache.user(remembered.userId)
      if (userRow && !isExpired(remembered.columns)) {
        this.touch(keyId, remembered.columns)
        return { keyId, columns: remembered.columns, userRow }
      }
      this.#verified.delete(digest)
    }

    const decoded = AccessToken.decode(this.prefix, fullToken)
    if (!decoded || !isUuid(decoded.identifier)) return null

    const cached = authCache.apiKey(decoded.identifier)
    const cachedUser = cached && authCache.user(cached.userId)
    if (cached && cachedUser) {
      const token = this.dbRowToAccessToken(cached.columns as unknown as AccessTokenDbColumns)
      if (!token.verify(decoded.secret) || token.isExpired()) return null
      this.#remember(digest, cached)
      this.touch(decoded.identifier, cached.columns)
      return { keyId: decoded.identifier, columns: cached.columns, userRow: cachedUser }
    }

    const readStartedAt = authCache.now()
    const db = await this.getDb()
    const row = await db
      .from(`${this.table} as k`)
      .join('users as u', 'u.id', 'k.tokenable_id')
      .where('k.id', decoded.identifier)
      .where('k.type', this.type)
      .select(
        'u.*',
        'k.id as k_id',
        'k.tokenable_id as k_tokenable_id',
        'k.type as k_type',
        'k.name as k_name',
        'k.hash as k_hash',
        'k.abilities as k_abilities',
        'k.created_at as k_created_at',
        'k.updated_at as k_updated_at',
        'k.last_used_at as k_last_used_at',
        'k.expires_at as k_expires_at'
      )
      .first()
    if (!row) return null

    const keyColumns: AccessTokenDbColumns = {
      id: row.k_id,
      tokenable_id: row.k_tokenable_id,
      type: row.k_type,
      name: row.k_name,
      hash: row.k_hash,
      abilities: row.k_abilities,
      created_at: row.k_created_at,
      updated_at: row.k_updated_at,
      last_used_at: row.k_last_used_at,
      expires_at: row.k_expires_at,
    }
    const token = this.dbRowToAccessToken(keyColumns)
    if (!token.verify(decoded.secret) || token.isExpired()) return null

    const userRow: Record<string, unknown> = {}
    for (const [column, value] of Object.entries(row)) {
      if (!column.startsWith('k_')) userRow[column] = value
    }
    authCache.storeApiKey(
      { columns: keyColumns as unknown as Record<string, unknown>, userId: String(row.id) },
      userRow,
      readStartedAt
    )

    const columns = keyColumns as unknown as Record<string, unknown>
    this.touch(decoded.identifier, columns)
    return { keyId: decoded.identifier, columns, userRow }
  }

  #remember(digest: string, entry: CachedApiKey) {
    if (this.#verified.size >= MAX_VERIFIED) {
      const oldest = this.#verified.keys().next().value
      if (oldest !== undefined) this.#verified.delete(oldest)
    }
    this.#verified.set(digest, entry)
  }

  async verify(tokenValue: Secret<string>): Promise<AccessToken | null> {
    const verified = await this.verifyWithUser(tokenValue)
    return verified
      ? this.dbRowToAccessToken(verified.columns as unknown as AccessTokenDbColumns)
      : null
  }

  /**
   * Records use of the key when the stored time is older than the
   * resolution; `columns` (possibly the cached row) learns the new time so
   * the next requests do not write again.
   */
  private touch(keyId: string, columns: Record<string, unknown>) {
    const stored = columns.last_used_at as Date | string | null | undefined
    const lastUsed = stored ? new Date(stored).getTime() : 0
    if (Date.now() - lastUsed < LAST_USED_RESOLUTION_MS) return
    const now = new Date()
    columns.last_used_at = now
    const staleBefore = DateTime.fromJSDate(now).minus({ milliseconds: LAST_USED_RESOLUTION_MS })
    // Not awaited: the answer must not wait for this bookkeeping write.
    void this.getDb()
      .then((db) =>
        db
          .from(this.table)
          .where('id', keyId)
          .where((query) => {
            query.whereNull('last_used_at').orWhere('last_used_at', '<', staleBefore.toJSDate())
          })
          .update({ last_used_at: now })
      )
      .catch(() => {})
  }
}
