import db from '@adonisjs/lucid/services/db'
import type { QueryClientContract } from '@adonisjs/lucid/types/database'

/**
 * The one place billing and referrals read the agents table (owned by
 * app/agents: `agents` with `user_id`, `status`, `created_at`). Until that
 * table exists every count is 0, so plans work before agents do.
 */
export const AGENTS_TABLE = 'agents'

/** Agent status meaning "paused because the owner's agent limit shrank" (CONTRACT.md). */
export const PAUSED_STATUS = 'paused'
/** The status a resumed agent gets back (its container is started by the agents area). */
export const RESUMED_STATUS = 'active'

let present = false

/** True once the agents table exists (remembered: tables are not dropped at run time). */
export async function agentsTableExists(
  client: QueryClientContract = db.connection()
): Promise<boolean> {
  if (present) return true
  const result = await client.rawQuery('select to_regclass(?) is not null as present', [
    AGENTS_TABLE,
  ])
  present = result.rows[0]?.present === true
  return present
}

/** How many agents the account has (any status). */
export async function countAgents(
  userId: string,
  client: QueryClientContract = db.connection()
): Promise<number> {
  if (!(await agentsTableExists(client))) return 0
  const row = await client.from(AGENTS_TABLE).where('user_id', userId).count('* as total').first()
  return Number(row?.total ?? 0)
}

/** Which of these accounts have created at least one agent. */
export async function accountsWithAgents(
  userIds: string[],
  client: QueryClientContract = db.connection()
): Promise<Set<string>> {
  if (userIds.length === 0 || !(await agentsTableExists(client))) return new Set()
  const rows: { user_id: string }[] = await client
    .from(AGENTS_TABLE)
    .whereIn('user_id', userIds)
    .distinct('user_id')
  return new Set(rows.map((row) => row.user_id))
}

export interface AgentSlotRow {
  id: string
  status: string
  created_at: Date
}

/** The account's agents, oldest first, locked for update in `client`'s transaction. */
export async function lockAgentsOf(
  userId: string,
  client: QueryClientContract
): Promise<AgentSlotRow[]> {
  if (!(await agentsTableExists(client))) return []
  return client
    .from(AGENTS_TABLE)
    .where('user_id', userId)
    .orderBy([
      { column: 'created_at', order: 'asc' },
      { column: 'id', order: 'asc' },
    ])
    .select('id', 'status', 'created_at')
    .forUpdate()
}

/** Sets the status of these agents (ids of one account). */
export async function setAgentStatus(
  ids: string[],
  status: string,
  client: QueryClientContract
): Promise<void> {
  if (ids.length === 0) return
  await client.from(AGENTS_TABLE).whereIn('id', ids).update({ status, updated_at: new Date() })
}

/** Accounts that have paused agents (candidates for resuming). */
export async function accountsWithPausedAgents(
  client: QueryClientContract = db.connection()
): Promise<string[]> {
  if (!(await agentsTableExists(client))) return []
  const rows: { user_id: string }[] = await client
    .from(AGENTS_TABLE)
    .where('status', PAUSED_STATUS)
    .distinct('user_id')
  return rows.map((row) => row.user_id)
}
