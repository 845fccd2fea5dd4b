import { DateTime } from 'luxon'
import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import Notification from '#identity/models/notification'
import { isUuid } from '#core/http/ids'

export interface NotificationInput {
  /** Machine-readable kind, e.g. `welcome`, `export_ready`, `payment_received`. */
  type: string
  title: string
  body: string
}

export interface NotificationView {
  id: string
  type: string
  title: string
  body: string
  createdAt: string
}

/** Unread notifications listed at most (newest first). */
const UNREAD_LIST_LIMIT = 100

export function presentNotification(notification: Notification): NotificationView {
  return {
    id: notification.id,
    type: notification.type,
    title: notification.title,
    body: notification.body,
    createdAt: notification.createdAt.toUTC().toISO()!,
  }
}

/**
 * Stores an in-app notification for a user. Any feature calls this (inside
 * its own transaction when it passes `trx`, so the notification exists only
 * if the change it announces does).
 */
export async function notify(
  userId: string,
  input: NotificationInput,
  options: { trx?: TransactionClientContract } = {}
): Promise<Notification> {
  return Notification.create(
    {
      userId,
      type: input.type.slice(0, 64),
      title: input.title.slice(0, 200),
      body: input.body,
    },
    { client: options.trx }
  )
}

export async function unreadFor(userId: string): Promise<Notification[]> {
  return Notification.query()
    .where('user_id', userId)
    .whereNull('read_at')
    .orderBy('created_at', 'desc')
    .limit(UNREAD_LIST_LIMIT)
}

/** The newest notifications of a user, read or not (the staff console's account page). */
export async function latestNotificationsOf(
  userId: string,
  limit: number
): Promise<Notification[]> {
  return Notification.query().where('user_id', userId).orderBy('created_at', 'desc').limit(limit)
}

/** Marks the caller's own notifications read; other ids are ignored. */
export async function markRead(userId: string, ids: string[]): Promise<number> {
  const valid = ids.filter(isUuid)
  if (valid.length === 0) return 0
  const rows = await Notification.query()
    .where('user_id', userId)
    .whereIn('id', valid)
    .whereNull('read_at')
    .update({ read_at: DateTime.now().toJSDate() })
  return Number(Array.isArray(rows) ? rows[0] : rows) || 0
}

const notificationService = { notify, unreadFor, markRead }
export default notificationService
