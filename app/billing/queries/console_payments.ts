import db from '@adonisjs/lucid/services/db'
import { likePrefix, newestFirstPage, type Page } from '#core/database/list_pages'
import { isUuid } from '#core/http/ids'

/**
 * Payments as the staff console reads them (docs/console.md): the list
 * with each payment's account, an account's latest payments and the
 * month's revenue on the overview.
 */
export interface PaymentListRow {
  signature: string
  payer: string
  token: string
  amount_base_units: string
  decimals: number
  usd_value: string
  purchase_kind: string
  purchase_key: string
  billing_period: string
  status: string
  created_at: Date
  account_email: string | null
  account_id: string | null
}

/** Newest first; `accountSearch` is an account id or an account e-mail prefix. */
export async function paymentsPage(
  accountSearch: string | undefined,
  page: number,
  size: number
): Promise<Page<PaymentListRow>> {
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
  return newestFirstPage(query, page, size, { createdAt: 'p.created_at', id: 'p.id' })
}

/** An account's payments, newest first (the latest 20). */
export async function paymentsOfAccount(userId: string) {
  return db
    .from('payments')
    .where('user_id', userId)
    .orderBy('created_at', 'desc')
    .limit(20)
    .select('signature', 'token', 'usd_value', 'purchase_key', 'status', 'created_at')
}

/** USD received in completed payments since `since`. */
export async function revenueSince(since: Date): Promise<number> {
  const row = await db
    .from('payments')
    .where('status', 'completed')
    .where('created_at', '>=', since)
    .sum('usd_value as usd')
    .first()
  return Number(row?.usd ?? 0)
}
