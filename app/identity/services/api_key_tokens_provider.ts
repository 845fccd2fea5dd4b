import { DateTime } from 'luxon'
import type { Secret } from '@adonisjs/core/helpers'
import type { LucidModel } from '@adonisjs/lucid/types/model'
import { AccessToken, DbAccessTokensProvider } from '@adonisjs/auth/access_tokens'
import type { AccessTokenDbColumns } from '@adonisjs/auth/types/access_tokens'
import { authCache } from '#identity/services/auth_cache'

export const API_KEY_PREFIX = 'hk_'
export const API_KEYS_TABLE = 'api_keys'
const API_KEY_TYPE = 'api_key'

/** `last_used_at` is written at most this often per key (not on every call). */
const LAST_USED_RESOLUTION_MS = 5 * 60 * 1000

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value)
}

/** A verified key together with the raw users row it belongs to (one query). */
export interface VerifiedApiKey {
  token: AccessToken
  userRow: Record<string, unknown>
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

  async verifyWithUser(tokenValue: Secret<string>): Promise<VerifiedApiKey | null> {
    const decoded = AccessToken.decode(this.prefix, tokenValue.release())
    if (!decoded || !isUuid(decoded.identifier)) return null

    const cached = authCache.apiKey(decoded.identifier)
    const cachedUser = cached && authCache.user(cached.userId)
    if (cached && cachedUser) {
      const token = this.dbRowToAccessToken(cached.columns as unknown as AccessTokenDbColumns)
      if (!token.verify(decoded.secret) || token.isExpired()) return null
      this.touch(token, cached.columns)
      return { token, userRow: cachedUser }
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

    this.touch(token, keyColumns as unknown as Record<string, unknown>)
    return { token, userRow }
  }

  async verify(tokenValue: Secret<string>): Promise<AccessToken | null> {
    const verified = await this.verifyWithUser(tokenValue)
    return verified?.token ?? null
  }

  /**
   * Records use of the key when the stored time is older than the
   * resolution; `columns` (possibly the cached row) learns the new time so
   * the next requests do not write again.
   */
  private touch(token: AccessToken, columns: Record<string, unknown>) {
    const lastUsed = token.lastUsedAt?.getTime() ?? 0
    if (Date.now() - lastUsed < LAST_USED_RESOLUTION_MS) return
    const now = new Date()
    token.lastUsedAt = now
    columns.last_used_at = now
    const staleBefore = DateTime.fromJSDate(now).minus({ milliseconds: LAST_USED_RESOLUTION_MS })
    // Not awaited: the answer must not wait for this bookkeeping write.
    void this.getDb()
      .then((db) =>
        db
          .from(this.table)
          .where('id', token.identifier as string)
          .where((query) => {
            query.whereNull('last_used_at').orWhere('last_used_at', '<', staleBefore.toJSDate())
          })
          .update({ last_used_at: now })
      )
      .catch(() => {})
  }
}
