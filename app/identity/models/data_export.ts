import { DateTime } from 'luxon'
import { column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'

export type DataExportStatus = 'processing' | 'ready' | 'failed'

/** One personal data export job and, once ready, its ZIP under storage/exports. */
export default class DataExport extends UuidModel {
  @column()
  declare userId: string

  @column()
  declare status: DataExportStatus

  @column()
  declare fileName: string | null

  @column({ consume: (value) => (value === null ? null : Number(value)) })
  declare sizeBytes: number | null

  @column()
  declare error: string | null

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime

  @column.dateTime()
  declare completedAt: DateTime | null

  @column.dateTime()
  declare expiresAt: DateTime | null
}
