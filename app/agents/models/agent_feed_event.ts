import { DateTime } from 'luxon'
import { column } from '@adonisjs/lucid/orm'
import { UuidModel } from '#core/database/uuid_model'

/** `budget`: an AI Credit budget reached 80 % or 100 % (app/credits/services/credit_budgets.ts). */
export const feedEventTypes = ['status_change', 'error', 'message', 'budget'] as const
export type FeedEventType = (typeof feedEventTypes)[number]

/** One event of an agent's activity feed. */
export default class AgentFeedEvent extends UuidModel {
  static table = 'agent_feed_events'

  @column()
  declare agentId: string

  @column()
  declare type: FeedEventType

  @column()
  declare content: string

  /** A status_change's transition (stored status or container state); null when unknown. */
  @column()
  declare fromState: string | null

  @column()
  declare toState: string | null

  @column.dateTime({ autoCreate: true })
  declare createdAt: DateTime
}
