import app from '@adonisjs/core/services/app'
import db from '@adonisjs/lucid/services/db'
import { NotFoundException } from '#core/exceptions/api_exceptions'
import { ApiKeyTokensProvider, isUuid } from '#identity/services/api_key_tokens_provider'
import User from '#identity/models/user'

/**
 * Read models of the console's lists and detail pages. Searches are prefix
 * matches on lower-cased columns with text_pattern_ops indexes, and pages
 * fetch one row more than they show to know whether a next page exists
 * (no count(*) over large tables per page view).
 */
export const PAGE_SIZE = 25

export interface Page<T> {
  rows: T[]
  page: number
  hasMore: boolean
}

function likePrefix(value: string) {
  return `${value
    .trim()
    .toLowerCase()
    .replace(/[%_\\]/g, '\\$&')}%`
}

function paged<T>(rows: T[], page: number): Page<T> {
  return { rows: rows.slice(0, PAGE_SIZE), page, hasMore: rows.length > PAGE_SIZE }
}

export async function searchAccounts(search: string | undefined, page: number) {
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
    else if (/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(term)) query.where('wallet_address', term)
    else {
      const prefix = likePrefix(term)
      query.where((q) =>
        q.whereRaw('lower(email) like ?', [prefix]).orWhereRaw('lower(username) like ?', [prefix])
      )
    }
  }
  const rows = await query
    .orderBy('created_at', 'desc')
    .orderBy('id')
    .offset((page - 1) * PAGE_SIZE)
    .limit(PAGE_SIZE + 1)
  return paged(rows, page)
}

export async function findAccount(userId: string): Promise<User> {
  const user = isUuid(userId) ? await User.find(userId) : null
  if (!user) throw new NotFoundException('Account not found')
  return user
}

export async function accountDetail(userId: string) {
  const user = await findAccount(userId)
  const [ledger, agents, payments, tickets, apiKeys, notifications] = await Promise.all([
    db
      .from('credit_ledger')
      .where('user_id', user.id)
      .orderBy('created_at', 'desc')
      .limit(20)
      .select('kind', 'credits', 'balance_after', 'reason', 'model', 'created_at'),
    db
      .from('agents')
      .where('user_id', user.id)
      .orderBy('created_at', 'desc')
      .limit(50)
      .select('id', 'name', 'slug', 'framework', 'status', 'created_at'),
    db
      .from('payments')
      .where('user_id', user.id)
      .orderBy('created_at', 'desc')
      .limit(20)
      .select('signature', 'token', 'usd_value', 'purchase_key', 'status', 'created_at'),
    db
      .from('support_tickets')
      .where('user_id', user.id)
      .orderBy('created_at', 'desc')
      .limit(20)
      .select('id', 'subject', 'status', 'created_at'),
    db
      .from('api_keys')
      .where('tokenable_id', user.id)
      .orderBy('created_at', 'desc')
      .select('id', 'name', 'created_at', 'last_used_at'),
    db
      .from('notifications')
      .where('user_id', user.id)
      .orderBy('created_at', 'desc')
      .limit(10)
      .select('type', 'title', 'read_at', 'created_at'),
  ])
  return {
    user,
    ledger,
    agents,
    payments,
    tickets,
    // Only the display prefix of a key is ever shown, never its hash.
    apiKeys: apiKeys.map((key) => ({
      id: key.id,
      label: key.name,
      prefix: ApiKeyTokensProvider.displayPrefix(key.id),
      createdAt: key.created_at,
      lastUsedAt: key.last_used_at,
    })),
    notifications,
  }
}

export async function searchAgents(search: string | undefined, page: number) {
  const query = db
    .from('agents as a')
    .join('users as u', 'u.id', 'a.user_id')
    .select(
      'a.id',
      'a.name',
      'a.slug',
      'a.framework',
      'a.status',
      'a.message_count',
      'a.created_at',
      'u.email as owner_email'
    )
  const term = search?.trim()
  if (term) {
    if (isUuid(term)) query.where((q) => q.where('a.id', term).orWhere('a.user_id', term))
    else {
      const prefix = likePrefix(term)
      query.where((q) =>
        q
          .whereRaw('lower(a.name) like ?', [prefix])
          .orWhere('a.slug', 'like', prefix)
          .orWhereRaw('lower(u.email) like ?', [prefix])
      )
    }
  }
  const rows = await query
    .orderBy('a.created_at', 'desc')
    .orderBy('a.id')
    .offset((page - 1) * PAGE_SIZE)
    .limit(PAGE_SIZE + 1)
  return paged(rows, page)
}

export async function paymentsPage(accountSearch: string | undefined, page: number) {
  const query = db
    .from('payments as p')
    .leftJoin('users as u', 'u.id', 'p.user_id')
    .select(
      'p.signature',
      'p.payer',
      'p.token',
      'p.amount_base_units',
      'p.decimals',
      'p.usd_value',
      'p.purchase_kind',
      'p.purchase_key',
      'p.billing_period',
      'p.status',
      'p.created_at',
      'u.email as account_email',
      'u.id as account_id'
    )
  const term = accountSearch?.trim()
  if (term) {
    if (isUuid(term)) query.where('p.user_id', term)
    else query.whereRaw('lower(u.email) like ?', [likePrefix(term)])
  }
  const rows = await query
    .orderBy('p.created_at', 'desc')
    .orderBy('p.id')
    .offset((page - 1) * PAGE_SIZE)
    .limit(PAGE_SIZE + 1)
  return paged(rows, page)
}

/** An agent's live figures; a stopped or sleeping agent shows zeros, not an error. */
export async function agentMonitoring(agentId: string): Promise<Record<string, unknown>> {
  const runtime: any = await app.container.make('runtime')
  try {
    return await runtime.monitoring(agentId)
  } catch {
    return {
      cpuPercent: 0,
      memoryMb: 0,
      memoryLimitMb: null,
      restartCount: 0,
      status: 'not running',
    }
  }
}
