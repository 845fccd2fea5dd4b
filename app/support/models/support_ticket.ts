import { DateTime } from 'luxon'
import { beforeCreate, column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'

export const ticketCategories = ['technical', 'billing', 'account', 'other'] as const
export type TicketCategory = (typeof ticketCategories)[number]
export const ticketStatuses = ['open', 'waiting', 'closed'] as const
/** open: waits for staff; waiting: staff answered, waits for the holder; closed. */
export type TicketStatus = (typeof ticketStatuses)[number]

/** A support request from an account holder. */
export default class SupportTicket extends UuidModel {
  @column()
  declare userId: string

  @column()
  declare subject: string

  @column()
  declare body: string

  @column()
  declare category: TicketCategory

  @column()
  declare status: TicketStatus

  /** The staff member working on it, if any. */
  @column()
  declare assignedToId: string | null

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime

  @column.dateTime({ autoCreate: true, autoUpdate: true })
  declare updatedAt: DateTime

  @beforeCreate()
  static assignId(ticket: SupportTicket) {
    if (!ticket.status) ticket.status = 'open'
  }
}
