import { randomUUID } from 'node:crypto'
import { BaseModel, beforeCreate, column } from '@adonisjs/lucid/orm'

/**
 * Base of every model: a UUID primary key assigned by the application before
 * insert (so the id is known without a round trip, e.g. to write files or
 * tokens under it in the same transaction).
 */
export class UuidModel extends BaseModel {
  static selfAssignPrimaryKey = true

  @column({ isPrimary: true })
  declare id: string

  @beforeCreate()
  static assignUuid(model: UuidModel) {
    if (!model.id) model.id = randomUUID()
  }
}
