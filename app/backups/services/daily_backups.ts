import { randomUUID } from 'node:crypto'
import { createBackup } from '#backups/services/backup_service'
import runtime from '#runtime/services/runtime'
import db from '@adonisjs/lucid/services/db'
import logger from '@adonisjs/core/services/logger'
import type { PeriodicJob } from '#core/jobs/periodic_jobs'
import { backupConfig } from '#config/backups'
import Agent from '#agents/models/agent'
import { isUuid } from '#core/http/ids'
import { agentFoldersWithArchives, removeAgentArchives } from '#backups/services/backup_store'

/**
 * Job: a daily backup of every agent whose newest daily one is a day old
 * (or that has none), then the oldest beyond the owner's plan removed;
 * archives of agents that no longer exist are deleted.
 */
export async function runDailyBackups(
  now = new Date(),
  options: { agentIds?: string[] } = {}
): Promise<number> {
  if (!backupConfig.daily) return 0
  // A runtime whose agents' folders are never on this host (swarm, a remote engine): no backups.
  const probe = await runtime.hostFolders(randomUUID())
  if ('unavailable' in probe && !probe.untilCreated) return 0
  let made = 0
  const due = await db
    .from('agents')
    .whereNotExists((query) =>
      query
        .from('agent_backups')
        .whereRaw('agent_backups.agent_id = agents.id')
        .where('kind', 'daily')
        .where('created_at', '>', new Date(now.getTime() - 24 * 60 * 60 * 1000))
    )
    .select('id')
    // Tests back up their own agents only.
    .if(options.agentIds, (query) => query.whereIn('id', options.agentIds!))
  for (const row of due) {
    const agent = await Agent.find(row.id)
    if (!agent) continue
    try {
      await createBackup(agent, 'daily')
      made += 1
    } catch (error) {
      logger.warn({ agentId: agent.id, err: error }, 'backups: daily backup failed')
    }
  }
  const folders = await agentFoldersWithArchives()
  if (folders.length > 0) {
    const rows = await db.from('agents').whereIn('id', folders.filter(isUuid)).select('id')
    const known = new Set(rows.map((agent) => agent.id as string))
    for (const id of folders) if (!known.has(id)) await removeAgentArchives(id)
  }
  return made
}

export const dailyBackupsJob: PeriodicJob = {
  name: 'backups.daily',
  everyMs: backupConfig.dailyCheckEveryMs,
  // Not at boot: a restarted service does not back up every agent at once.
  runOnStart: false,
  async run() {
    const made = await runDailyBackups()
    if (made > 0) logger.info({ made }, 'backups: daily backups made')
  },
}
