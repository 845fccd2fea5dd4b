import { DateTime } from 'luxon'
import { column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'

/** A single-use challenge a wallet signs to be linked to the account (10 minutes). */
export default class WalletNonce extends UuidModel {
  @column()
  declare userId: string

  @column()
  declare nonce: string

  /** The exact text the wallet must sign. */
  @column()
  declare message: string

  @column.dateTime()
  declare expiresAt: DateTime

  @column.dateTime()
  declare usedAt: DateTime | null

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime
}
