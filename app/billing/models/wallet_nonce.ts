import { randomUUID } from 'node:crypto'
import { DateTime } from 'luxon'
import { BaseModel, beforeCreate, column } from '@adonisjs/lucid/orm'

/** A single-use challenge a wallet signs to be linked to the account (10 minutes). */
export default class WalletNonce extends BaseModel {
  static selfAssignPrimaryKey = true

  @column({ isPrimary: true })
  declare id: string

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

  @beforeCreate()
  static assignId(row: WalletNonce) {
    row.id ??= randomUUID()
  }
}
