import { randomBytes } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import { deadHoldersIn } from '#core/jobs/instance'
import encryption from '@adonisjs/core/services/encryption'
import type { ChannelState, ChannelStateReport, ChannelStore } from '#plugins/types'
import type { ChannelSettings } from '#channels/services/channel_config'

/**
 * Every read and write of `agent_channels` (docs/channels.md). A row
 * exists per configured (or paired) channel of an agent; its lease says
 * which instance holds the connection. Writes from a holder are made only
 * while it still holds the row, so an instance that lost its lease cannot
 * overwrite what the new holder reports.
 */
export interface ChannelRow {
  id: string
  agent_id: string
  channel: string
  fingerprint: string
  state: ChannelState
  last_error: string | null
  halted: boolean
  identity: Record<string, string>
  qr_code: string | null
  qr_raw: string | null
  qr_expires_at: Date | null
  session_state: string | null
  webhook_secret: string | null
  holder: string | null
  lease_expires_at: Date | null
  failures: number
  retry_at: Date | null
}

/** How long a claim lasts without renewal; holders renew every tick (a third of it or less). */
export const CHANNEL_LEASE_MS = 20_000

export async function rowsOfAgent(agentId: string): Promise<ChannelRow[]> {
  const result = await db.rawQuery('select * from agent_channels where agent_id = ?', [agentId])
  return result.rows
}

/** What staff see of a channel: its state, account, last error and holder. */
export type ChannelStateRow = Pick<
  ChannelRow,
  'channel' | 'state' | 'identity' | 'last_error' | 'holder' | 'lease_expires_at'
>

/** An agent's channels by name, as the staff console's agent page shows them. */
export async function channelStatesOf(agentId: string): Promise<ChannelStateRow[]> {
  return db
    .from('agent_channels')
    .where('agent_id', agentId)
    .orderBy('channel', 'asc')
    .select('channel', 'state', 'identity', 'last_error', 'holder', 'lease_expires_at')
}

export async function rowById(id: string): Promise<ChannelRow | undefined> {
  const result = await db.rawQuery('select * from agent_channels where id = ?', [id])
  return result.rows[0]
}

/**
 * Makes the rows match the config: a row per config-connected channel
 * (a new fingerprint restarts it and lifts a halt), none for a removed
 * one. Pairing channels are left alone (pair-channel owns their rows).
 */
export async function syncRowsWithConfig(
  agentId: string,
  settings: Map<string, ChannelSettings>,
  configChannels: string[]
) {
  await db.transaction(async (trx) => {
    for (const name of configChannels) {
      const wanted = settings.get(name)
      if (!wanted?.configured) {
        await trx.rawQuery('delete from agent_channels where agent_id = ? and channel = ?', [
          agentId,
          name,
        ])
        continue
      }
      await trx.rawQuery(
        `insert into agent_channels (agent_id, channel, fingerprint)
         values (?, ?, ?)
         on conflict (agent_id, channel) do update
           set fingerprint = excluded.fingerprint, halted = false, failures = 0, retry_at = null,
               state = 'connecting', last_error = null, updated_at = now()
           where agent_channels.fingerprint <> excluded.fingerprint`,
        [agentId, name, wanted.fingerprint]
      )
    }
  })
  await refreshIntegrations(agentId)
}

/** Starts (or restarts) a pairing: the row is wanted again with a new session (a new QR). */
export async function startPairing(agentId: string, channel: string): Promise<ChannelRow> {
  const result = await db.rawQuery(
    `insert into agent_channels (agent_id, channel, fingerprint, state)
     values (?, ?, ?, 'connecting')
     on conflict (agent_id, channel) do update
       set halted = false, failures = 0, retry_at = null, state = 'connecting', last_error = null,
           qr_code = null, qr_raw = null, qr_expires_at = null,
           session_state = null,
           fingerprint = ?, updated_at = now()
     returning *`,
    [agentId, channel, randomBytes(16).toString('hex'), randomBytes(16).toString('hex')]
  )
  return result.rows[0]
}

export async function deleteRow(agentId: string, channel: string): Promise<boolean> {
  const result = await db.rawQuery(
    'delete from agent_channels where agent_id = ? and channel = ? returning id',
    [agentId, channel]
  )
  await refreshIntegrations(agentId)
  return result.rows.length > 0
}

/** Claims up to `limit` rows free to connect (active agent, not halted, lease lapsed, retry due). */
export async function claimFreeRows(holder: string, limit: number): Promise<ChannelRow[]> {
  const result = await db.rawQuery(
    `update agent_channels set holder = ?, lease_expires_at = now() + (? * interval '1 millisecond')
     where id in (
       select c.id from agent_channels c join agents a on a.id = c.agent_id
       where a.status = 'active' and not c.halted
         and (c.holder is null or c.lease_expires_at < now() or c.holder = any(?::text[]))
         and (c.retry_at is null or c.retry_at <= now())
       order by c.updated_at
       limit ? for update of c skip locked)
     returning *`,
    [holder, CHANNEL_LEASE_MS, await deadHoldersIn('agent_channels', 'holder'), limit]
  )
  return result.rows
}

/**
 * Renews this holder's leases on rows it still may hold; answers the ids
 * and fingerprints that stay. A row missing from the answer was removed,
 * halted, taken over, or its agent is no longer active.
 */
export async function renewRows(
  holder: string,
  ids: string[]
): Promise<Map<string, { fingerprint: string }>> {
  if (ids.length === 0) return new Map()
  const result = await db.rawQuery(
    `update agent_channels c set lease_expires_at = now() + (? * interval '1 millisecond')
     from agents a
     where c.id = any(?) and c.holder = ? and a.id = c.agent_id and a.status = 'active' and not c.halted
     returning c.id, c.fingerprint`,
    [CHANNEL_LEASE_MS, ids, holder]
  )
  return new Map(
    result.rows.map((row: { id: string; fingerprint: string }) => [
      row.id,
      { fingerprint: row.fingerprint },
    ])
  )
}

/** Frees this holder's lease; `state` says what the row shows meanwhile. */
export async function releaseRow(
  id: string,
  holder: string,
  update: { state?: ChannelState; error?: string | null; retryInMs?: number; halt?: boolean } = {}
) {
  const result = await db.rawQuery(
    `update agent_channels set holder = null, lease_expires_at = null,
       state = coalesce(?, state), last_error = case when ? then ? else last_error end,
       halted = halted or ?,
       failures = case when ?::bigint is null then failures else failures + 1 end,
       retry_at = case when ?::bigint is null then null else now() + (?::bigint * interval '1 millisecond') end,
       updated_at = now()
     where id = ? and holder = ?
     returning agent_id`,
    [
      update.state ?? null,
      update.error !== undefined,
      update.error ?? null,
      update.halt ?? false,
      update.retryInMs ?? null,
      update.retryInMs ?? null,
      update.retryInMs ?? null,
      id,
      holder,
    ]
  )
  if (result.rows[0]) await refreshIntegrations(result.rows[0].agent_id)
}

/** Writes what a connector reported, while `holder` holds the row. False when it no longer does. */
export async function writeReport(
  id: string,
  holder: string,
  report: ChannelStateReport
): Promise<boolean> {
  const result = await db.rawQuery(
    `update agent_channels set state = ?, last_error = ?,
       identity = case when ?::jsonb is null then identity else ?::jsonb end,
       qr_code = ?, qr_raw = ?,
       qr_expires_at = case when ?::int is null then null else now() + (?::int * interval '1 second') end,
       failures = case when ? = 'connected' then 0 else failures end,
       updated_at = now()
     where id = ? and holder = ?
     returning agent_id`,
    [
      report.state,
      report.error?.slice(0, 500) ?? null,
      report.identity ? JSON.stringify(report.identity) : null,
      report.identity ? JSON.stringify(report.identity) : null,
      report.qr?.dataUrl ?? null,
      report.qr?.raw ?? null,
      report.qr?.expiresIn ?? null,
      report.qr?.expiresIn ?? null,
      report.state,
      id,
      holder,
    ]
  )
  if (!result.rows[0]) return false
  await refreshIntegrations(result.rows[0].agent_id)
  return true
}

/** Keeps agents.integrations (the detail's connected channel names) in step with the rows. */
export async function refreshIntegrations(agentId: string) {
  await db.rawQuery(
    `update agents set integrations = coalesce((
       select jsonb_agg(channel order by channel) from agent_channels
       where agent_id = ? and state = 'connected'), '[]'::jsonb)
     where id = ?`,
    [agentId, agentId]
  )
}

/** The connector's durable state for one row, encrypted at rest. */
export function rowStore(id: string): ChannelStore {
  return {
    async load<T>() {
      const result = await db.rawQuery('select session_state from agent_channels where id = ?', [
        id,
      ])
      const stored = result.rows[0]?.session_state
      if (!stored) return undefined
      const json = encryption.decrypt<string>(stored)
      return typeof json === 'string' ? (JSON.parse(json) as T) : undefined
    },
    async save(value: unknown) {
      await db.rawQuery(
        'update agent_channels set session_state = ?, updated_at = now() where id = ?',
        [value === undefined ? null : encryption.encrypt(JSON.stringify(value)), id]
      )
    },
  }
}

/** The webhook secret of a row (made on first use), in clear. */
export async function webhookSecretOf(row: ChannelRow): Promise<string> {
  const stored = row.webhook_secret ? encryption.decrypt<string>(row.webhook_secret) : null
  if (typeof stored === 'string') return stored
  const secret = randomBytes(24).toString('base64url')
  await db.rawQuery('update agent_channels set webhook_secret = ? where id = ?', [
    encryption.encrypt(secret),
    row.id,
  ])
  return secret
}
