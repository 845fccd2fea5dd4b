import { DateTime } from 'luxon'
import { column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'

/** A paid referral: both sides got `creditsEach` AI Credits once. */
export default class ReferralReward extends UuidModel {
  @column()
  declare referrerId: string | null

  @column()
  declare referredId: string

  @column()
  declare creditsEach: number

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime
}
