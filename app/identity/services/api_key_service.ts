import type { AccessToken } from '@adonisjs/auth/access_tokens'
import db from '@adonisjs/lucid/services/db'
import {
  EmailNotVerifiedException,
  NotFoundException,
  ValidationException,
} from '#core/exceptions/api_exceptions'
import User from '#identity/models/user'
import { ApiKeyTokensProvider } from '#identity/services/api_key_tokens_provider'
import { isUuid } from '#core/http/ids'
import { authCache } from '#identity/services/auth_cache'

/** Keys one account may hold at once. */
export const MAX_API_KEYS = 50

export interface ApiKeyView {
  id: string
  label: string
  prefix: string
  createdAt: string
  lastUsedAt: string | null
}

export interface CreatedApiKey {
  id: string
  label: string
  /** The full key: returned by the creation answer only, never again. */
  key: string
  prefix: string
  createdAt: string
}

function present(token: AccessToken): ApiKeyView {
  const id = String(token.identifier)
  return {
    id,
    label: token.name ?? '',
    prefix: ApiKeyTokensProvider.displayPrefix(id),
    createdAt: token.createdAt.toISOString(),
    lastUsedAt: token.lastUsedAt ? token.lastUsedAt.toISOString() : null,
  }
}

/** POST /auth/api-keys: verified accounts only; stored as a SHA-256 hash. */
export async function createApiKey(user: User, label: string): Promise<CreatedApiKey> {
  if (!user.isVerified) {
    throw new EmailNotVerifiedException('Verify your e-mail address before creating an API key')
  }
  const existing = await User.apiKeys.all(user)
  if (existing.length >= MAX_API_KEYS) {
    throw new ValidationException(`An account can hold at most ${MAX_API_KEYS} API keys`)
  }
  const token = await User.apiKeys.create(user, ['*'], { name: label })
  const view = present(token)
  return {
    id: view.id,
    label: view.label,
    key: token.value!.release(),
    prefix: view.prefix,
    createdAt: view.createdAt,
  }
}

/** GET /auth/api-keys: newest first, without secrets. */
export async function listApiKeys(user: User): Promise<ApiKeyView[]> {
  const tokens = await User.apiKeys.all(user)
  return tokens
    .map(present)
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id))
}

/** DELETE /auth/api-keys/:id: the key stops working with the next request. */
export async function revokeApiKey(user: User, id: string): Promise<void> {
  const deleted = isUuid(id) ? await User.apiKeys.delete(user, id) : 0
  if (!deleted) throw new NotFoundException('API key not found')
  authCache.forgetApiKey(id)
}

/**
 * Every key of the account stops working with the next request (a
 * password reset: keys made with a stolen password must die). Answers how
 * many there were.
 */
export async function revokeAllApiKeys(userId: string): Promise<number> {
  const deleted: { id: string }[] = await db
    .from('api_keys')
    .where('tokenable_id', userId)
    .delete()
    .returning('id')
  // The delete trigger tells every instance; this one forgets at once.
  for (const row of deleted) authCache.forgetApiKey(String(row.id))
  return deleted.length
}

/** Issues a key without the HTTP checks (test helpers, seeding). */
export async function issueApiKey(user: User, label = 'default'): Promise<string> {
  const token = await User.apiKeys.create(user, ['*'], { name: label })
  return token.value!.release()
}
