import Notification from '#identity/models/notification'
import User from '#identity/models/user'
import { listApiKeys } from '#identity/services/api_key_service'

/** The identity area's sections of the data export (registered by start/export_sections.ts). */

const iso = (value: { toUTC(): { toISO(): string | null } } | null) =>
  value ? value.toUTC().toISO() : null

export async function profileForExport(userId: string) {
  const user = await User.findOrFail(userId)
  return {
    id: user.id,
    email: user.email,
    username: user.username,
    role: user.role,
    tier: user.tier,
    emailVerifiedAt: iso(user.emailVerifiedAt),
    referralCode: user.referralCode,
    referredById: user.referredById,
    walletAddress: user.walletAddress,
    aiCreditsBalance: user.aiCreditsBalance,
    subscriptionExpiresAt: iso(user.subscriptionExpiresAt),
    createdAt: iso(user.createdAt),
  }
}

export async function apiKeysForExport(userId: string) {
  return listApiKeys(await User.findOrFail(userId))
}

export async function notificationsForExport(userId: string) {
  const rows = await Notification.query().where('user_id', userId).orderBy('created_at', 'desc')
  return rows.map((row) => ({
    id: row.id,
    type: row.type,
    title: row.title,
    body: row.body,
    readAt: iso(row.readAt),
    createdAt: iso(row.createdAt),
  }))
}
