import { DateTime } from 'luxon'
import { column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'
import type { AddonKey } from '#config/plans'

/** One purchased agent pack: `extraAgents` more agents until `expiresAt`. */
export default class AddonSubscription extends UuidModel {
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
}
