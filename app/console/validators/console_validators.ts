import vine from '@vinejs/vine'
import { roles } from '#identity/models/user'
import { tierOrder } from '#config/plans'
import { ticketStatuses } from '#support/models/support_ticket'

export const consoleLoginValidator = vine.create({
  email: vine.string().trim().maxLength(254),
  password: vine.string().maxLength(1024),
})

export const secondFactorValidator = vine.create({
  code: vine.string().trim().minLength(6).maxLength(32),
})

export const listQueryValidator = vine.create({
  q: vine.string().trim().maxLength(100).optional(),
  page: vine.number().withoutDecimals().min(1).max(10_000).optional(),
  status: vine.enum(ticketStatuses).optional(),
})

export const grantValidator = vine.create({
  credits: vine.number().withoutDecimals().min(1).max(1_000_000),
  reason: vine.string().trim().minLength(3).maxLength(500),
})

export const roleValidator = vine.create({
  role: vine.enum(roles),
})

export const staffReplyValidator = vine.create({
  body: vine.string().trim().minLength(1).maxLength(10_000),
  internal: vine.boolean().optional(),
})

export const ticketStatusValidator = vine.create({
  status: vine.enum(ticketStatuses),
})

export const assignValidator = vine.create({
  assigneeId: vine.string().trim().uuid().optional(),
})

export const planValidator = vine.create({
  tier: vine.enum(tierOrder),
  /** Last day of a periodic plan (YYYY-MM-DD, UTC); empty: no end. */
  until: vine.date({ formats: ['YYYY-MM-DD'] }).optional(),
  reason: vine.string().trim().minLength(3).maxLength(500),
})

/** Restore from a ticket: one of the holder's agents and one of its backups. */
export const restoreBackupValidator = vine.create({
  agentId: vine.string().trim().uuid(),
  backupId: vine.string().trim().uuid(),
})
