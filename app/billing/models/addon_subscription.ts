import { randomUUID } from 'node:crypto'
import { DateTime } from 'luxon'
import { BaseModel, beforeCreate, column } from '@adonisjs/lucid/orm'
import type { AddonKey } from '#config/plans'

/** One purchased agent pack: `extraAgents` more agents until `expiresAt`. */
export default class AddonSubscription extends BaseModel {
  static selfAssignPrimaryKey = true

  @column({ isPrimary: true })
  declare id: string

  @column()
  declare userId: string

  @column()
  declare addonKey: AddonKey

  @column()
  declare extraAgents: number

  @column()
  declare paymentId: string | null

  @column.dateTime()
  declare startsAt: DateTime

  @column.dateTime()
  declare expiresAt: DateTime

  /** Set once by the lapse job after `expiresAt` (the owner was told). */
  @column.dateTime()
  declare lapsedAt: DateTime | null

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime

  @column.dateTime({ autoCreate: true, autoUpdate: true })
  declare updatedAt: DateTime

  @beforeCreate()
  static assignId(row: AddonSubscription) {
    row.id ??= randomUUID()
  }
}
