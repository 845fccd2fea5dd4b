import { DateTime } from 'luxon'
import { column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'

/** An in-app notification for one user; unread while `readAt` is null. */
export default class Notification extends UuidModel {
  @column()
  declare userId: string

  @column()
  declare type: string

  @column()
  declare title: string

  @column()
  declare body: string

  @column.dateTime()
  declare readAt: DateTime | null

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime
}
