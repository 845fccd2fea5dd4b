import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import AuditEntry from '#console/models/audit_entry'
import type User from '#identity/models/user'

export interface AuditInput {
  action: string
  targetType: 'account' | 'agent' | 'ticket' | 'session'
  targetId: string | null
  before?: Record<string, unknown> | null
  after?: Record<string, unknown> | null
}

/** Writes one audit entry for a staff action (in the action's transaction when given). */
export async function audit(
  actor: User,
  input: AuditInput,
  trx?: TransactionClientContract
): Promise<void> {
  await AuditEntry.create(
    {
      actorId: actor.id,
      actorEmail: actor.email,
      action: input.action,
      targetType: input.targetType,
      targetId: input.targetId,
      before: input.before ?? null,
      after: input.after ?? null,
    },
    { client: trx }
  )
}

export const AUDIT_PAGE_SIZE = 50

export async function auditPage(page: number, actionPrefix?: string) {
  const query = AuditEntry.query().orderBy('id', 'desc')
  if (actionPrefix) query.where('action', 'like', `${actionPrefix.replace(/[%_\\]/g, '\\$&')}%`)
  const rows = await query.offset((page - 1) * AUDIT_PAGE_SIZE).limit(AUDIT_PAGE_SIZE + 1)
  return { entries: rows.slice(0, AUDIT_PAGE_SIZE), hasMore: rows.length > AUDIT_PAGE_SIZE }
}
