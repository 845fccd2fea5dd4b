import { randomUUID } from 'node:crypto'
import { DateTime } from 'luxon'
import { BaseModel, beforeCreate, column } from '@adonisjs/lucid/orm'

/**
 * One config version of an agent (also the spec's "config snapshot": its
 * `id` is the snapshot id). `config` is the full config, secrets encrypted.
 */
export default class AgentConfigVersion extends BaseModel {
  static table = 'agent_config_versions'
  static selfAssignPrimaryKey = true

  @column({ isPrimary: true })
  declare id: string

  @column()
  declare agentId: string

  @column()
  declare version: number

  @column()
  declare message: string

  @column({ prepare: (value: unknown) => JSON.stringify(value ?? {}), serializeAs: null })
  declare config: Record<string, unknown>

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime

  @beforeCreate()
  static assignId(row: AgentConfigVersion) {
    if (!row.id) row.id = randomUUID()
  }
}
