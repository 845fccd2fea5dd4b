import { DateTime } from 'luxon'
import { column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'

/**
 * One config version of an agent (also the spec's "config snapshot": its
 * `id` is the snapshot id). `config` is the full config, secrets encrypted.
 */
export default class AgentConfigVersion extends UuidModel {
  static table = 'agent_config_versions'

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
}
