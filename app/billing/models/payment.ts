import { DateTime } from 'luxon'
import { column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'
import type { AddonKey, BillingPeriod, TierKey } from '#config/plans'
import type { PaymentToken } from '#billing/services/pricing'

/** A verified on-chain payment; `signature` is unique (the replay guard). */
export default class Payment extends UuidModel {
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
}
