import { randomUUID } from 'node:crypto'
import { DateTime } from 'luxon'
import { BaseModel, beforeCreate, column } from '@adonisjs/lucid/orm'

/** A paid referral: both sides got `creditsEach` AI Credits once. */
export default class ReferralReward extends BaseModel {
  static selfAssignPrimaryKey = true

  @column({ isPrimary: true })
  declare id: string

  @column()
  declare referrerId: string | null

  @column()
  declare referredId: string

  @column()
  declare creditsEach: number

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime

  @beforeCreate()
  static assignId(row: ReferralReward) {
    row.id ??= randomUUID()
  }
}
