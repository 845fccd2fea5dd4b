import db from '@adonisjs/lucid/services/db'
import { NotFoundException } from '#core/exceptions/api_exceptions'
import { likePrefix, newestFirstPage, type Page } from '#core/database/list_pages'
import User, { type Role } from '#identity/models/user'
import { isUuid } from '#core/http/ids'

/**
 * Accounts as the staff console reads them (docs/console.md): the search
 * list, one account, the count on the overview, the link to an agent's
 * owner and the staff a ticket can be assigned to.
 */
export interface AccountListRow {
  id: string
  email: string
  username: string
  role: Role
  tier: string
  ai_credits_balance: number
  disabled_at: Date | null
  created_at: Date
}

/** A Solana wallet address (base58, 32 to 44 characters). */
const WALLET_ADDRESS = /^[1-9A-HJ-NP-Za-km-z]{32,44}$/

/** Newest first; `search` is an id, a wallet address, or an e-mail or username prefix. */
export async function accountsPage(
  search: string | undefined,
  page: number,
  size: number
): Promise<Page<AccountListRow>> {
  const query = db
    .from('users')
    .select(
      'id',
      'email',
      'username',
      'role',
      'tier',
      'ai_credits_balance',
      'disabled_at',
      'created_at'
    )
  const term = search?.trim()
  if (term) {
    if (isUuid(term)) query.where('id', term)
    else if (WALLET_ADDRESS.test(term)) query.where('wallet_address', term)
    else {
      const prefix = likePrefix(term)
      query.where((q) =>
        q.whereRaw('lower(email) like ?', [prefix]).orWhereRaw('lower(username) like ?', [prefix])
      )
    }
  }
  return newestFirstPage(query, page, size)
}

/** The account with this id; 404 for anything else (a malformed id too). */
export async function findAccount(userId: string): Promise<User> {
  const user = isUuid(userId) ? await User.find(userId) : null
  if (!user) throw new NotFoundException('Account not found')
  return user
}

export async function accountCount(): Promise<number> {
  const row = await db.from('users').count('* as n').first()
  return Number(row?.n ?? 0)
}

/** What a link to an account needs (null when there is no such account). */
export async function accountLinkOf(userId: string): Promise<{ id: string; email: string } | null> {
  return db.from('users').where('id', userId).select('id', 'email').first()
}

/** Enabled accounts holding one of `roles`, by e-mail (the first 200). */
export async function enabledAccountsWithRoles(
  roles: readonly Role[]
): Promise<{ id: string; email: string }[]> {
  return db
    .from('users')
    .whereIn('role', [...roles])
    .whereNull('disabled_at')
    .orderBy('email')
    .limit(200)
    .select('id', 'email')
}
