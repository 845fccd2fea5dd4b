import { DateTime } from 'luxon'
import { column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'
import type { AddonKey, BillingPeriod, TierKey } from '#config/plans'
import type { PaymentToken, Purchase } from '#billing/services/pricing'

/** An exact payment amount offered to one account, matched on chain by its memo. */
export default class Quote extends UuidModel {
  @column()
  declare userId: string

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

  /** Base units as a decimal string (numeric column: never rounded through a float). */
  @column()
  declare amountBaseUnits: string

  @column({ consume: (value) => Number(value) })
  declare usdValue: number

  @column()
  declare tokenUsdPrice: number

  @column()
  declare memo: string

  @column.dateTime()
  declare expiresAt: DateTime

  @column.dateTime()
  declare usedAt: DateTime | null

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime

  @column.dateTime({ autoCreate: true, autoUpdate: true })
  declare updatedAt: DateTime

  get purchase(): Purchase {
    return {
      kind: this.purchaseKind,
      key: this.purchaseKey,
      billingPeriod: this.billingPeriod,
    } as Purchase
  }
}
