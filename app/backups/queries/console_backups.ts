import db from '@adonisjs/lucid/services/db'
import { presentBackup, type BackupRow, type BackupView } from '#backups/services/backup_service'

/**
 * Backups as the staff console reads them (docs/console.md): an agent's
 * latest on its page, and an account's agents' latest on a ticket of that
 * account, where operators restore one. Served by the
 * (agent_id, created_at) index; metadata only, never an archive's content.
 */

/** How many backups of one agent the console lists (newest first). */
export const CONSOLE_BACKUPS_PER_AGENT = 20

/** An agent's latest backups, newest first. */
export async function latestBackupsOf(
  agentId: string,
  limit = CONSOLE_BACKUPS_PER_AGENT
): Promise<BackupView[]> {
  const rows = await db
    .from('agent_backups')
    .where('agent_id', agentId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
  return rows.map(presentBackup)
}

export interface AgentBackups {
  agent: { id: string; name: string; slug: string }
  backups: BackupView[]
}

/**
 * The account's agents that have backups (newest agent first), each with
 * its latest backups (newest first): what a ticket of the account offers
 * to restore. One query; agents without a backup are left out.
 */
export async function backupsOfAccountAgents(
  userId: string,
  perAgent = CONSOLE_BACKUPS_PER_AGENT
): Promise<AgentBackups[]> {
  const result = await db.rawQuery<{
    rows: (BackupRow & { agent_name: string; agent_slug: string })[]
  }>(
    `select ranked.* from (
       select b.*, a.name as agent_name, a.slug as agent_slug, a.created_at as agent_created_at,
              row_number() over (partition by b.agent_id order by b.created_at desc, b.id desc) as n
         from agent_backups b join agents a on a.id = b.agent_id
        where a.user_id = ?
     ) ranked
     where ranked.n <= ?
     order by ranked.agent_created_at desc, ranked.agent_id, ranked.n`,
    [userId, perAgent]
  )
  const byAgent = new Map<string, AgentBackups>()
  for (const row of result.rows) {
    let entry = byAgent.get(row.agent_id)
    if (!entry) {
      entry = {
        agent: { id: row.agent_id, name: row.agent_name, slug: row.agent_slug },
        backups: [],
      }
      byAgent.set(row.agent_id, entry)
    }
    entry.backups.push(presentBackup(row))
  }
  return [...byAgent.values()]
}
