import Payment from '#billing/models/payment'
import AddonSubscription from '#billing/models/addon_subscription'
import { exportPayment } from '#billing/services/payment_view'

/** The billing area's sections of the data export (registered by start/export_sections.ts). */

export async function paymentsForExport(userId: string) {
  const rows = await Payment.query().where('user_id', userId).orderBy('created_at', 'asc')
  return rows.map(exportPayment)
}

export async function addonSubscriptionsForExport(userId: string) {
  const rows = await AddonSubscription.query().where('user_id', userId).orderBy('created_at', 'asc')
  return rows.map((row) => ({
    id: row.id,
    addon: row.addonKey,
    extraAgents: row.extraAgents,
    paymentId: row.paymentId,
    startsAt: row.startsAt.toUTC().toISO(),
    expiresAt: row.expiresAt.toUTC().toISO(),
    lapsedAt: row.lapsedAt?.toUTC().toISO() ?? null,
  }))
}
