import { DateTime } from 'luxon'
import { column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'

/** One message in a ticket's thread: a staff reply, an internal note or the holder's reply. */
export default class SupportTicketReply extends UuidModel {
  @column()
  declare ticketId: string

  @column()
  declare authorId: string | null

  @column()
  declare authorKind: 'staff' | 'holder'

  @column()
  declare body: string

  /** Staff-only note: never shown to the holder. */
  @column()
  declare internal: boolean

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime
}
