import { randomUUID } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import { chatConfig } from '#config/chat'
import { preparedQuery } from '#core/database/prepared_query'
import { feedEventInsertSql, feedEventValues } from '#agents/services/feed_service'
import type { PeriodicJob } from '#core/jobs/periodic_jobs'
import { afterReply, agentKey } from '#core/http/after_reply'

/**
 * Stored conversations (table chat_messages) and the per-day message
 * counters (chat_daily_counts). Each processed exchange is one
 * transaction: the agent's `message_count` / `last_active_at`, today's
 * counter, both messages, and the trim to the newest
 * `storedMessagesKept` messages of that agent. A periodic job removes
 * messages older than `storedMessagesDays`.
 *
 * Counting: one processed message = one user message answered. The same
 * number feeds `messageCount`, `messagesProcessed` and analytics; clearing
 * or replacing the stored history does not change it.
 */
export interface StoredTurn {
  role: 'user' | 'assistant'
  content: string
}

export interface StoredMessageView extends StoredTurn {
  /** Unix milliseconds. */
  ts: number
}

function windowStart(now = new Date()): Date {
  return new Date(now.getTime() - chatConfig.storedMessagesDays * 24 * 60 * 60_000)
}

export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10)
}

/** The agent's newest stored turns (within the window), oldest first. */
export async function recentTurns(agentId: string, limit: number): Promise<StoredTurn[]> {
  // The agent's last exchange may still be on its way (after_reply.ts): it is context too.
  await afterReply.pending(agentKey(agentId))
  const result = await db.rawQuery(
    `select role, content from chat_messages
      where agent_id = ? and created_at >= ?
      order by created_at desc, seq desc limit ?`,
    [agentId, windowStart(), limit]
  )
  return (result.rows as StoredTurn[]).reverse()
}

async function trimAgent(trx: TransactionClientContract, agentId: string) {
  await trx.rawQuery(
    `delete from chat_messages where agent_id = :agentId and (created_at, seq) < (
       select created_at, seq from chat_messages where agent_id = :agentId
        order by created_at desc, seq desc offset :offset limit 1)`,
    { agentId, offset: chatConfig.storedMessagesKept - 1 }
  )
}

/**
 * Stores one answered exchange, counts it and adds the agent's `message`
 * feed event (`feed`: its text). Returns false when the agent no longer
 * exists (deleted while the model answered): nothing is stored then.
 */
export async function recordExchange(
  agentId: string,
  user: { content: string; at: Date },
  assistant: { content: string; at: Date },
  feed: string
): Promise<boolean> {
  // One statement (one round trip, one commit). The agent row's lock orders
  // concurrent exchanges of one agent. The trim reads the rows as they were
  // before this statement, so it keeps `kept - 2` of them plus the 2 new ones.
  // It commits without waiting for its WAL flush (synchronous_commit off for
  // this transaction only): no money moves here, and on the hosted path the
  // credit settlement's synchronous commit, running alongside, is then the
  // one flush the reply waits for. A database crash can lose the last
  // fraction of a second of conversation and counts, never a charge. The
  // feed event goes in the same statement (the agents area's insert): one
  // round trip and one commit for all of it.
  const event = feedEventValues({ type: 'message', content: feed })
  const result = await preparedQuery<{ agents: string }>(
    'chat.record_exchange',
    `with relaxed as materialized (
       select set_config('synchronous_commit', 'off', true) as setting),
     agent as (
       update agents set message_count = message_count + 1,
              last_active_at = greatest(coalesce(last_active_at, cast($8 as timestamptz)),
                                    cast($8 as timestamptz))
        where id = $1 and (select setting from relaxed) is not null returning id),
     counted as (
       insert into chat_daily_counts (agent_id, day, messages)
       select id, cast($2 as date), 1 from agent
       on conflict (agent_id, day) do update set messages = chat_daily_counts.messages + 1
       returning 1),
     stored as (
       insert into chat_messages (id, agent_id, role, content, created_at)
       select cast($3 as uuid), id, 'user', cast($4 as text),
              cast($5 as timestamptz) from agent
       union all
       select cast($6 as uuid), id, 'assistant', cast($7 as text),
              cast($8 as timestamptz) from agent
       returning 1),
     trimmed as (
       delete from chat_messages
        where agent_id = (select id from agent) and (created_at, seq) < (
          select created_at, seq from chat_messages where agent_id = $1
           order by created_at desc, seq desc offset $9 limit 1)
       returning 1),
     fed as (
       ${feedEventInsertSql('agent', { id: '$10', type: '$11', content: '$12' })}
       returning 1)
     select (select count(*) from agent) as agents,
            (select count(*) from counted) + (select count(*) from stored)
              + (select count(*) from trimmed) + (select count(*) from fed) as touched`,
    [
      agentId,
      utcDay(user.at),
      randomUUID(),
      user.content,
      user.at,
      randomUUID(),
      assistant.content,
      assistant.at,
      Math.max(0, chatConfig.storedMessagesKept - 3),
      event.id,
      event.type,
      event.content,
    ]
  )
  return Number(result.rows[0]?.agents ?? 0) > 0
}

/** GET /agents/:id/chat/history: the stored conversation, oldest first. */
export async function historyOf(agentId: string): Promise<StoredMessageView[]> {
  const result = await db.rawQuery(
    `select role, content, created_at from chat_messages
      where agent_id = ? and created_at >= ?
      order by created_at desc, seq desc limit ?`,
    [agentId, windowStart(), chatConfig.storedMessagesKept]
  )
  return (result.rows as { role: StoredTurn['role']; content: string; created_at: Date }[])
    .reverse()
    .map((row) => ({ role: row.role, content: row.content, ts: row.created_at.getTime() }))
}

/** POST /agents/:id/chat/history: the given turns become the whole stored history. */
export async function replaceHistory(agentId: string, turns: StoredTurn[]): Promise<number> {
  const kept = turns.slice(-chatConfig.storedMessagesKept)
  await db.transaction(async (trx) => {
    await trx.rawQuery('delete from chat_messages where agent_id = ?', [agentId])
    if (kept.length === 0) return
    const now = new Date()
    await trx.table('chat_messages').multiInsert(
      kept.map((turn) => ({
        id: randomUUID(),
        agent_id: agentId,
        role: turn.role,
        content: turn.content,
        created_at: now,
      }))
    )
  })
  return kept.length
}

/** DELETE /agents/:id/chat/history. */
export async function clearHistory(agentId: string): Promise<void> {
  await db.rawQuery('delete from chat_messages where agent_id = ?', [agentId])
}

/**
 * Job: removes messages older than the window (in batches), and trims the
 * agents active in the last two days to the newest `storedMessagesKept`
 * (the insert path trims too; this catches anything that slipped by).
 */
export async function pruneStoredMessages(now = new Date()): Promise<number> {
  let removed = 0
  const cutoff = windowStart(now)
  for (;;) {
    const result = await db.rawQuery(
      `delete from chat_messages where id in (
         select id from chat_messages where created_at < ? limit 5000)`,
      [cutoff]
    )
    removed += result.rowCount ?? 0
    if ((result.rowCount ?? 0) < 5000) break
  }
  const since = utcDay(new Date(now.getTime() - 24 * 60 * 60_000))
  const active = await db.rawQuery(
    'select distinct agent_id from chat_daily_counts where day >= ?',
    [since]
  )
  for (const { agent_id: agentId } of active.rows as { agent_id: string }[]) {
    await db.transaction((trx) => trimAgent(trx, agentId))
  }
  return removed
}

/** Registered by start/jobs.ts: prunes the stored messages every hour. */
export const pruneStoredMessagesJob: PeriodicJob = {
  name: 'chat.prune_messages',
  everyMs: 60 * 60_000,
  run: async () => {
    await pruneStoredMessages()
  },
}

/** The `conversations` section of the data export: every stored message of the account's agents. */
export async function conversationsForExport(userId: string) {
  const result = await db.rawQuery(
    `select m.agent_id, m.role, m.content, m.created_at from chat_messages m
       join agents a on a.id = m.agent_id
      where a.user_id = ? order by m.agent_id, m.created_at, m.seq`,
    [userId]
  )
  return (
    result.rows as { agent_id: string; role: string; content: string; created_at: Date }[]
  ).map((row) => ({
    agentId: row.agent_id,
    role: row.role,
    content: row.content,
    ts: row.created_at.getTime(),
  }))
}
