/**
 * New agents from an archive: POST /agents/import (an uploaded backup, from
 * this install or another) and POST /agents/:id/clone (the agent's state now).
 * The archive is checked whole before anything is written (archive_reader.ts).
 */
import { assertFoldersReachable, clearConfigOf } from '#backups/services/backup_service'
import { archiveAgent } from '#backups/services/agent_archive'
import { join } from 'node:path'
import { backupConfig } from '#config/backups'
import type Agent from '#agents/models/agent'
import { frameworkPlugin } from '#agents/services/agent_config'
import { createAgent } from '#agents/services/agent_service'
import { agentPaths, removeAgentFolders } from '#runtime/agent_paths'
import { compareVersions, refuseArchive } from '#backups/services/archive_format'
import { unpackArchive } from '#backups/services/archive_reader'
import { readAgentDocument, writeDocuments } from '#backups/services/agent_data'
import { writeAgentFolders } from '#backups/services/agent_folders'
import { agentsFolder, withWorkFolder } from '#backups/services/backup_store'

/** A name of 2 to 50 characters from an archived one. */
function agentName(name: string, suffix = ''): string {
  const base = name
    .trim()
    .slice(0, 50 - suffix.length)
    .trim()
  const named = `${base}${suffix}`
  return named.length >= 2 ? named : `Imported agent${suffix}`.slice(0, 50)
}

/**
 * Makes a new agent of `user` from the archive file `archive` (checked
 * first: nothing is created from a refused one). The agent gets a new id,
 * slug and tokens; channel connections are not carried. Tier limits apply
 * (400 beyond the plan's agents). A framework newer here than in the
 * archive starts from the archived state (the framework migrates its own
 * files); one older here is refused.
 */
export async function agentFromArchive(
  user: { id: string },
  archive: string,
  options: { nameSuffix?: string } = {}
) {
  assertFoldersReachable()
  const agentsDir = agentsFolder()
  return withWorkFolder(async (folder) => {
    const staging = join(folder, 'unpacked')
    const manifest = await unpackArchive(archive, staging, backupConfig)
    const document = await readAgentDocument(staging)
    if (document.framework !== manifest.framework.name) {
      refuseArchive('agent.json and the manifest name different frameworks')
    }
    const plugin = await frameworkPlugin(manifest.framework.name)
    if (compareVersions(manifest.framework.version, plugin.version) > 0) {
      refuseArchive(
        `it was made with ${plugin.name} ${manifest.framework.version}, newer than ${plugin.version} on this service; import it on a service with that version or later`
      )
    }
    const config = clearConfigOf(manifest, document.config)
    delete config.channels
    let created: string | undefined
    try {
      return await createAgent(
        user,
        {
          name: agentName(document.name, options.nameSuffix),
          framework: plugin.name,
          description: document.description,
          avatarUrl: document.avatarUrl,
          config,
        },
        {
          populate: async (agent, trx) => {
            created = agent.id
            agent.installedSkills = document.installedSkills
            agent.useTransaction(trx)
            await agent.save()
            await writeDocuments(trx, agent.id, staging)
            await writeAgentFolders(agentsDir, agent.id, staging)
          },
        }
      )
    } catch (error) {
      // The row was rolled back: its folders go too.
      if (created) await removeAgentFolders(agentPaths(agentsDir, created)).catch(() => {})
      throw error
    }
  })
}

/** POST /agents/:id/clone: a new agent of the same owner from the agent's state now. */
export async function cloneAgent(user: { id: string }, agent: Agent) {
  assertFoldersReachable()
  return withWorkFolder(async (folder) => {
    const archive = join(folder, 'clone.tar.gz')
    await archiveAgent(agent, archive, { includeSecrets: true })
    return agentFromArchive(user, archive, { nameSuffix: ' (copy)' })
  })
}
