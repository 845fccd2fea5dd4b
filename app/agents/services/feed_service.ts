import { randomUUID } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import AgentFeedEvent, { type FeedEventType } from '#agents/models/agent_feed_event'

/** Events answered by GET /agents/:id/feed (newest first). */
export const FEED_PAGE = 50
/** Events kept per agent; older ones are pruned now and then. */
export const FEED_KEPT = 500
const CONTENT_MAX = 2000

export interface FeedEventView {
  id: string
  type: FeedEventType
  content: string
  ts: string
  /** status_change only: the state it went from (null when not known) and to. */
  from?: string | null
  to?: string
}

/** What a status_change moved between: stored statuses or container states. */
export interface Transition {
  from: string | null
  to: string
}

/**
 * Stores one activity feed event of an agent: `status_change` and `error`
 * (written by the agents area from runtime events and lifecycle calls),
 * `message` (written by the chat area when a message is processed).
 * Never throws for a deleted agent: the event is dropped.
 */
export async function recordFeedEvent(
  agentId: string,
  event: { type: FeedEventType; content: string; transition?: Transition }
): Promise<void> {
  try {
    await AgentFeedEvent.create({
      agentId,
      type: event.type,
      content: event.content.slice(0, CONTENT_MAX),
      fromState: event.transition?.from ?? null,
      toState: event.transition?.to ?? null,
    })
  } catch (error) {
    // 23503: the agent was deleted meanwhile; nothing to record.
    if ((error as { code?: string }).code === '23503') return
    throw error
  }
  await pruneFeedNowAndThen(agentId)
}

/**
 * One event's insert as part of another statement, for a writer that stores
 * it in the same round trip as its own rows (the chat's exchange store): it
 * inserts the event for each `id` the CTE `agentCte` yields (none when the
 * agent is gone), with `type` and `content` from the statement's
 * placeholders; `feedEventValues` gives their values. Call
 * `pruneFeedNowAndThen` after it, as recordFeedEvent does.
 */
export function feedEventInsertSql(
  agentCte: string,
  placeholders: { id: string; type: string; content: string }
): string {
  return `insert into agent_feed_events (id, agent_id, type, content, created_at)
       select cast(${placeholders.id} as uuid), id, cast(${placeholders.type} as text),
              cast(${placeholders.content} as text), now()
         from ${agentCte}`
}

/** The values of a feedEventInsertSql event (a new id, the content cut to what the feed keeps). */
export function feedEventValues(event: { type: FeedEventType; content: string }) {
  return { id: randomUUID(), type: event.type, content: event.content.slice(0, CONTENT_MAX) }
}

/** Prunes about once per 20 writes, keeping the newest FEED_KEPT events. */
export async function pruneFeedNowAndThen(agentId: string): Promise<void> {
  if (Math.random() >= 0.05) return
  await db.rawQuery(
    `delete from agent_feed_events where agent_id = ? and seq < (
       select seq from agent_feed_events where agent_id = ? order by seq desc offset ? limit 1)`,
    [agentId, agentId, FEED_KEPT - 1]
  )
}

/** The newest events of an agent, newest first. */
export async function feedOf(agentId: string, limit = FEED_PAGE): Promise<FeedEventView[]> {
  const rows = await AgentFeedEvent.query()
    .where('agent_id', agentId)
    .orderBy('seq', 'desc')
    .limit(limit)
  return rows.map((row) => ({
    id: row.id,
    type: row.type,
    content: row.content,
    ts: row.createdAt.toUTC().toISO()!,
    ...(row.toState ? { from: row.fromState, to: row.toState } : {}),
  }))
}
