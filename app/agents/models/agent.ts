import { DateTime } from 'luxon'
import { beforeCreate, column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'

/** Stored agent states (CONTRACT.md "Agent states stored"). */
export const agentStatuses = ['active', 'stopped', 'paused', 'error'] as const
export type AgentStatus = (typeof agentStatuses)[number]

/**
 * An agent. `config` holds the framework config with secret values
 * encrypted (see #agents/services/config_secrets): never answer it as is,
 * use the presenters of #agents/services/agent_presenter. The token columns
 * are never serialized: see #agents/services/agent_tokens.
 */
export default class Agent extends UuidModel {
  static table = 'agents'

  @column()
  declare userId: string

  @column()
  declare name: string

  @column()
  declare slug: string

  @column()
  declare description: string | null

  @column()
  declare avatarUrl: string | null

  @column()
  declare framework: string

  @column()
  declare status: AgentStatus

  /** Secret values encrypted. */
  @column({ prepare: (value: unknown) => JSON.stringify(value ?? {}), serializeAs: null })
  declare config: Record<string, unknown>

  @column()
  declare messageCount: number

  /** Catalogue skill ids, in install order (app/skills); rendered at every start. */
  @column({ prepare: (value: unknown) => JSON.stringify(value ?? []) })
  declare installedSkills: string[]

  /** Connected channel names, kept by app/channels (detail `integrations`). */
  @column({ prepare: (value: unknown) => JSON.stringify(value ?? []) })
  declare integrations: string[]

  @column.dateTime()
  declare lastActiveAt: DateTime | null

  /** Put to sleep at (idle or to make room); null while its container runs or boots. */
  @column.dateTime({ serializeAs: null })
  declare sleepingSince: DateTime | null

  @column({ serializeAs: null })
  declare proxyTokenHash: string

  @column({ serializeAs: null })
  declare proxyTokenEncrypted: string

  @column({ serializeAs: null })
  declare webhookTokenHash: string

  @column({ serializeAs: null })
  declare webhookTokenEncrypted: string

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime

  @column.dateTime({ autoCreate: true, autoUpdate: true })
  declare updatedAt: DateTime

  @beforeCreate()
  static assignDefaults(agent: Agent) {
    if (!agent.status) agent.status = 'active'
    if (agent.messageCount === undefined) agent.messageCount = 0
    if (agent.config === undefined) agent.config = {}
    if (agent.installedSkills === undefined) agent.installedSkills = []
  }
}
