import { randomUUID } from 'node:crypto'
import { DateTime } from 'luxon'
import { BaseModel, beforeCreate, column } from '@adonisjs/lucid/orm'

export const ticketCategories = ['technical', 'billing', 'account', 'other'] as const
export type TicketCategory = (typeof ticketCategories)[number]
export type TicketStatus = 'open' | 'pending' | 'closed'

/** A support request from an account holder. */
export default class SupportTicket extends BaseModel {
  static selfAssignPrimaryKey = true

  @column({ isPrimary: true })
  declare id: string

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

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime

  @column.dateTime({ autoCreate: true, autoUpdate: true })
  declare updatedAt: DateTime

  @beforeCreate()
  static assignId(ticket: SupportTicket) {
    if (!ticket.id) ticket.id = randomUUID()
    if (!ticket.status) ticket.status = 'open'
  }
}
