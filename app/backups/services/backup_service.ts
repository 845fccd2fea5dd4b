import { randomUUID } from 'node:crypto'
import { unlink } from 'node:fs/promises'
import { join } from 'node:path'
import db from '@adonisjs/lucid/services/db'
import { backupConfig } from '#config/backups'
import { NotFoundException } from '#core/exceptions/api_exceptions'
import type Agent from '#agents/models/agent'
import { effectiveTierOfRow } from '#identity/models/user'
import { findAgent } from '#agents/services/agent_access'
import { isUuid } from '#core/http/ids'
import { frameworkPlugin, validateConfig } from '#agents/services/agent_config'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { presentDetail } from '#agents/services/agent_presenter'
import {
  decryptSecrets,
  encryptSecrets,
  isSecretKey,
  type Config,
} from '#agents/services/config_secrets'
import { recordVersion } from '#agents/services/config_versions'
import { refuseArchive, type Manifest } from '#backups/services/archive_format'
import { unpackArchive } from '#backups/services/archive_reader'
import type { WrittenArchive } from '#backups/services/archive_writer'
import { readAgentDocument, writeDocuments } from '#backups/services/agent_data'
import {
  archiveAgent,
  archiveAtRest,
  installId,
  reachableFolders,
  type ArchiveOptions,
} from '#backups/services/agent_archive'
import { discardCheckpoint, writeAgentFolders } from '#backups/services/agent_folders'
import {
  agentBackupFolder,
  agentsFolder,
  archivePath,
  withWorkFolder,
} from '#backups/services/backup_store'

export type BackupKind = 'manual' | 'daily' | 'pre-restore'

export interface BackupView {
  id: string
  kind: BackupKind
  size: number
  sha256: string
  includeSecrets: boolean
  createdAt: string
}

export interface BackupRow {
  id: string
  agent_id: string
  kind: BackupKind
  size: string | number
  sha256: string
  include_secrets: boolean
  created_at: Date
}

/** A stored backup row as the API and the console show it. */
export function presentBackup(row: BackupRow): BackupView {
  return {
    id: row.id,
    kind: row.kind,
    size: Number(row.size),
    sha256: row.sha256,
    includeSecrets: row.include_secrets,
    createdAt: new Date(row.created_at).toISOString(),
  }
}

/**
 * Stores a new backup of `agent`, its archive written by `write` (which
 * fixes the agent's state at one moment); answers its row.
 */
async function storeBackup(
  agent: Agent,
  kind: BackupKind,
  options: ArchiveOptions,
  write: (target: string) => Promise<WrittenArchive>
): Promise<BackupView> {
  const id = randomUUID()
  await agentBackupFolder(agent.id)
  const target = archivePath(agent.id, id)
  const written = await write(target)
  try {
    const [row] = await db
      .table('agent_backups')
      .insert({
        id,
        agent_id: agent.id,
        kind,
        size: written.size,
        sha256: written.sha256,
        include_secrets: options.includeSecrets,
        created_at: new Date(),
      })
      .returning('*')
    await pruneBackups(agent.id, kind)
    return presentBackup(row)
  } catch (error) {
    // The agent was deleted meanwhile (foreign key), or the database failed: no stray file.
    await unlink(target).catch(() => {})
    throw error
  }
}

/**
 * POST /agents/:id/backups (and the daily job): a point-in-time backup; a
 * running agent is frozen for the copy of its folders (archiveAgent).
 */
export async function createBackup(
  agent: Agent,
  kind: BackupKind,
  options: { includeSecrets?: boolean } = {}
): Promise<BackupView> {
  const archive = { includeSecrets: options.includeSecrets === true }
  return storeBackup(agent, kind, archive, (target) => archiveAgent(agent, target, archive))
}

export async function listBackups(agentId: string): Promise<BackupView[]> {
  const rows = await db
    .from('agent_backups')
    .where('agent_id', agentId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
  return rows.map(presentBackup)
}

export async function findBackup(agentId: string, backupId: unknown): Promise<BackupView> {
  const row = isUuid(backupId)
    ? await db.from('agent_backups').where('agent_id', agentId).where('id', backupId).first()
    : null
  if (!row) throw new NotFoundException('Backup not found')
  return presentBackup(row)
}

async function removeBackup(agentId: string, backupId: string): Promise<void> {
  await db.from('agent_backups').where('agent_id', agentId).where('id', backupId).delete()
  await unlink(archivePath(agentId, backupId)).catch(() => {})
}

export async function deleteBackup(agentId: string, backupId: unknown) {
  const backup = await findBackup(agentId, backupId)
  await removeBackup(agentId, backup.id)
  return { deleted: true as const }
}

/** How many backups of one kind an agent keeps (daily by its owner's plan). */
async function keptOf(agentId: string, kind: BackupKind): Promise<number> {
  if (kind === 'manual') return backupConfig.manualKept
  if (kind === 'pre-restore') return backupConfig.preRestoreKept
  const owner = await db
    .from('agents')
    .join('users', 'users.id', 'agents.user_id')
    .where('agents.id', agentId)
    .select('users.tier', 'users.subscription_expires_at')
    .first()
  return backupConfig.dailyKept[owner ? effectiveTierOfRow(owner) : 'free']
}

/** Deletes the oldest backups of `kind` beyond what the agent keeps. */
export async function pruneBackups(agentId: string, kind: BackupKind): Promise<number> {
  const kept = await keptOf(agentId, kind)
  const stale = await db
    .from('agent_backups')
    .where('agent_id', agentId)
    .where('kind', kind)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .offset(kept)
    .select('id')
  for (const row of stale) await removeBackup(agentId, row.id)
  return stale.length
}

/** Secret values of `from` at paths where `into` has none (a restore of an archive without secrets). */
function carrySecrets(from: Config, into: Config): Config {
  const out: Config = { ...into }
  for (const [key, value] of Object.entries(from)) {
    if (isSecretKey(key)) {
      if (!(key in out)) out[key] = value
    } else if (isPlainObject(value) && isPlainObject(out[key])) {
      out[key] = carrySecrets(value, out[key])
    }
  }
  return out
}

function isPlainObject(value: unknown): value is Config {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The archive's config in the clear; 400 when its secrets are another install's. */
export function clearConfigOf(manifest: Manifest, stored: Config): Config {
  if (manifest.secrets === 'omitted') return stored
  if (manifest.install !== installId()) {
    refuseArchive(
      'it holds secrets encrypted by another installation; make the backup without includeSecrets to move the agent'
    )
  }
  return decryptSecrets(stored)
}

/**
 * POST /agents/:id/backups/:backupId/restore: the agent's current state
 * is saved first (a `pre-restore` backup), then its folders, config,
 * skills, schedules, knowledge and stored conversation become the
 * backup's. Its container is stopped meanwhile and started afresh after
 * (its sleep checkpoint is discarded). Channel connections stay as they
 * are; secret config values an archive left out keep their current value.
 */
export async function restoreBackup(agent: Agent, backupId: unknown) {
  const backup = await findBackup(agent.id, backupId)
  const host = await reachableFolders(agent.id)
  const preRestore = await agentLifecycle.withAgentQuiet(
    agent.id,
    () =>
      withWorkFolder(async (folder) => {
        const staging = join(folder, 'unpacked')
        const manifest = await unpackArchive(
          archivePath(agent.id, backup.id),
          staging,
          backupConfig
        )
        const document = await readAgentDocument(staging)
        if (document.framework !== agent.framework) {
          refuseArchive(`it is of a ${document.framework} agent, this one is ${agent.framework}`)
        }
        const archived = clearConfigOf(manifest, document.config)
        const atRest = { includeSecrets: false, priority: 'interactive' as const }
        const saved = await storeBackup(agent, 'pre-restore', atRest, (target) =>
          archiveAtRest(agent, target, atRest, host)
        )

        await db.transaction(async (trx) => {
          const locked = await findAgent(agent.id, { trx, forUpdate: true })
          const current = decryptSecrets(locked.config)
          const restored = carrySecrets(current, archived)
          // Connections are the channels area's: they stay as they are now.
          if (current.channels === undefined) delete restored.channels
          else restored.channels = current.channels
          const plugin = await frameworkPlugin(locked.framework)
          locked.config = encryptSecrets(validateConfig(plugin, restored))
          locked.installedSkills = document.installedSkills
          await recordVersion(trx, locked.id, locked.config, `Restored backup ${backup.id}`)
          locked.useTransaction(trx)
          await locked.save()
          await writeDocuments(trx, locked.id, staging)
        })
        await discardCheckpoint(agentsFolder(), agent.id)
        await writeAgentFolders(host, staging)
        return saved
      }),
    { fresh: true }
  )
  await agent.refresh()
  return { restoredFrom: backup.id, preRestoreBackup: preRestore, agent: presentDetail(agent) }
}
