import { randomUUID } from 'node:crypto'
import { DateTime } from 'luxon'
import { BaseModel, beforeCreate, column } from '@adonisjs/lucid/orm'

export type DataExportStatus = 'processing' | 'ready' | 'failed'

/** One personal data export job and, once ready, its ZIP under storage/exports. */
export default class DataExport extends BaseModel {
  static selfAssignPrimaryKey = true

  @column({ isPrimary: true })
  declare id: string

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

  @beforeCreate()
  static assignId(entry: DataExport) {
    if (!entry.id) entry.id = randomUUID()
  }
}
