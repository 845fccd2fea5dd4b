import { randomUUID } from 'node:crypto'
import { DateTime } from 'luxon'
import { BaseModel, beforeCreate, column } from '@adonisjs/lucid/orm'
import type { AddonKey, BillingPeriod, TierKey } from '#config/plans'
import type { PaymentToken } from '#billing/services/pricing'

/** A verified on-chain payment; `signature` is unique (the replay guard). */
export default class Payment extends BaseModel {
  static selfAssignPrimaryKey = true

  @column({ isPrimary: true })
  declare id: string

  @column()
  declare userId: string | null

  @column()
  declare quoteId: string | null

  @column()
  declare purchaseKind: 'tier' | 'addon'

  @column()
  declare purchaseKey: TierKey | AddonKey

  @column()
  declare billingPeriod: BillingPeriod

  @column()
  declare token: PaymentToken

  @column()
  declare mint: string | null

  @column()
  declare decimals: number

  /** Base units that reached the treasury, as a decimal string. */
  @column()
  declare amountBaseUnits: string

  @column({ consume: (value) => Number(value) })
  declare usdValue: number

  @column()
  declare signature: string

  @column()
  declare payer: string

  @column()
  declare status: 'completed'

  @column.dateTime()
  declare blockTime: DateTime

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime

  @column.dateTime({ autoCreate: true, autoUpdate: true })
  declare updatedAt: DateTime

  @beforeCreate()
  static assignId(payment: Payment) {
    payment.id ??= randomUUID()
  }
}
