import { createHash, hkdfSync } from 'node:crypto'
import { join } from 'node:path'
import logger from '@adonisjs/core/services/logger'
import { appKey } from '#config/app'
import type Agent from '#agents/models/agent'
import { frameworkPlugin } from '#agents/services/agent_config'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { ARCHIVE_FORMAT, FORMAT_VERSION } from '#backups/services/archive_format'
import type { FolderSource, WrittenArchive } from '#backups/services/archive_writer'
import { packApart } from '#backups/services/archive_packer'
import { collectDocuments } from '#backups/services/agent_data'
import { snapshotAgentFolders } from '#backups/services/folder_snapshot'
import { agentsFolder, withWorkFolder } from '#backups/services/backup_store'

/** What every archive holds, in the manifest's words. */
const ARCHIVE_CONTENTS = [
  'config',
  'workspace',
  'state',
  'home',
  'skills',
  'knowledge',
  'schedules',
  'chat history',
]

export interface ArchiveOptions {
  includeSecrets: boolean
}

/**
 * Names this install in a manifest without revealing anything of its key:
 * encrypted secrets are restorable only where this digest is the same.
 */
let installDigest: string | undefined
export function installId(): string {
  installDigest ??= createHash('sha256')
    .update(
      Buffer.from(hkdfSync('sha256', appKey.release(), 'agent-host', 'agent-backup-install', 32))
    )
    .digest('hex')
    .slice(0, 32)
  return installDigest
}

/**
 * Packs the archive of `agent` from its rows (`documents`) and its folders
 * as `folders` holds them, in the packer's low-priority process.
 */
async function packArchive(
  agent: Agent,
  target: string,
  documents: Record<string, unknown>,
  folders: FolderSource,
  options: ArchiveOptions
): Promise<WrittenArchive> {
  const plugin = await frameworkPlugin(agent.framework)
  return packApart(target, {
    folders,
    documents,
    manifest: {
      format: ARCHIVE_FORMAT,
      formatVersion: FORMAT_VERSION,
      createdAt: new Date().toISOString(),
      framework: { name: plugin.name, version: plugin.version },
      agent: { id: agent.id, name: agent.name },
      secrets: options.includeSecrets ? 'encrypted' : 'omitted',
      install: options.includeSecrets ? installId() : null,
      contents: ARCHIVE_CONTENTS,
    },
  })
}

/**
 * Writes the archive of `agent` to `target` from its folders as they are.
 * The caller holds its quiet window with the container down (a restore's
 * pre-restore backup), so folders and rows are of one moment.
 */
export async function archiveAtRest(agent: Agent, target: string, options: ArchiveOptions) {
  const documents = await collectDocuments(agent, options)
  return packArchive(
    agent,
    target,
    documents,
    { agentsDir: agentsFolder(), agentId: agent.id },
    options
  )
}

/** A quiet window's outcome: the archive written in it, or what it is packed from after. */
type Fixed =
  { written: WrittenArchive } | { documents: Record<string, unknown>; folders: FolderSource }

/**
 * Writes the archive of `agent` to `target`, of one moment
 * (docs/backups.md "Consistency"). In the agent's quiet window
 * (agentLifecycle.withAgentQuiet) its rows are read and its folders fixed:
 * a running agent is frozen while they are copied raw into a work folder
 * (folder_snapshot.ts) and runs on at once, the archive being packed from
 * that copy afterwards; an agent asleep (or one that cannot be frozen here,
 * put to sleep for it) is packed from its folders inside the window.
 */
export async function archiveAgent(
  agent: Agent,
  target: string,
  options: ArchiveOptions
): Promise<WrittenArchive> {
  return withWorkFolder(async (folder) => {
    const fixed = await agentLifecycle.withAgentQuiet<Fixed>(
      agent.id,
      async (how) => {
        if (how === 'down') return { written: await archiveAtRest(agent, target, options) }
        const frozenAt = performance.now()
        const documents = await collectDocuments(agent, options)
        const snapshot = join(folder, 'snapshot')
        const skipped = await snapshotAgentFolders(agentsFolder(), agent.id, snapshot)
        const frozenMs = Math.round(performance.now() - frozenAt)
        logger.info({ agentId: agent.id, frozenMs }, 'backups: agent frozen for the copy')
        return { documents, folders: { snapshot, skipped } }
      },
      { freeze: true }
    )
    if ('written' in fixed) return fixed.written
    return packArchive(agent, target, fixed.documents, fixed.folders, options)
  })
}
