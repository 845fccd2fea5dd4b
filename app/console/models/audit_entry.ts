import { DateTime } from 'luxon'
import { BaseModel, column } from '@adonisjs/lucid/orm'

/** One staff action: who did what to which target, with the state before and after. */
export default class AuditEntry extends BaseModel {
  @column({ isPrimary: true })
  declare id: number

  @column()
  declare actorId: string | null

  @column()
  declare actorEmail: string

  @column()
  declare action: string

  @column()
  declare targetType: string

  @column()
  declare targetId: string | null

  @column()
  declare before: Record<string, unknown> | null

  @column()
  declare after: Record<string, unknown> | null

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime
}
