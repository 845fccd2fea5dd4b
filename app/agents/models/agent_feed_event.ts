import { randomUUID } from 'node:crypto'
import { DateTime } from 'luxon'
import { BaseModel, beforeCreate, column } from '@adonisjs/lucid/orm'

export const feedEventTypes = ['status_change', 'error', 'message'] as const
export type FeedEventType = (typeof feedEventTypes)[number]

/** One event of an agent's activity feed. */
export default class AgentFeedEvent extends BaseModel {
  static table = 'agent_feed_events'
  static selfAssignPrimaryKey = true

  @column({ isPrimary: true })
  declare id: string

  @column()
  declare agentId: string

  @column()
  declare type: FeedEventType

  @column()
  declare content: string

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime

  @beforeCreate()
  static assignId(row: AgentFeedEvent) {
    if (!row.id) row.id = randomUUID()
  }
}
