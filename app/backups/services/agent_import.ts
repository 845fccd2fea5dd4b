/**
 * New agents from an archive: POST /agents/import (an uploaded backup, from
 * this install or another) and POST /agents/:id/clone (the agent's state now).
 * The archive is checked whole before anything is written (archive_reader.ts).
 */
import { randomUUID } from 'node:crypto'
import { clearConfigOf } from '#backups/services/backup_service'
import { archiveAgent, reachableFolders } from '#backups/services/agent_archive'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import Agent from '#agents/models/agent'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import runtime from '#runtime/services/runtime'
import { join } from 'node:path'
import { backupConfig } from '#config/backups'
import { frameworkPlugin } from '#agents/services/agent_config'
import { createAgent, deleteAgent } from '#agents/services/agent_service'
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
  const beforeStart = await foldersBeforeStart()
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
    let detail
    try {
      detail = await createAgent(
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
            if (beforeStart) await writeAgentFolders(await reachableFolders(agent.id), staging)
          },
        }
      )
    } catch (error) {
      // The row was rolled back: its folders go too.
      if (created && beforeStart) {
        await removeAgentFolders(agentPaths(agentsFolder(), created)).catch(() => {})
      }
      throw error
    }
    if (!beforeStart) await intoNewContainer(detail.id, staging)
    return detail
  })
}

/**
 * True when a new agent's folders can be written before its first start
 * (the process driver); false when only once its container exists (docker:
 * its volume is made with it); 503 when a backup can never reach them here.
 */
async function foldersBeforeStart(): Promise<boolean> {
  const probe = await runtime.hostFolders(randomUUID())
  if (!('unavailable' in probe)) return true
  if (probe.untilCreated) return false
  throw new ServiceUnavailableException(
    `Backups cannot reach agents' folders here: ${probe.unavailable}`
  )
}

/**
 * Docker: the new agent's first start made its container and volume; it
 * is stopped, its folders become the archive's, and it starts again. A
 * failure here deletes the agent, so nothing half-imported is left.
 */
async function intoNewContainer(agentId: string, staging: string): Promise<void> {
  try {
    await agentLifecycle.withAgentQuiet(
      agentId,
      async () => writeAgentFolders(await reachableFolders(agentId), staging),
      { fresh: true }
    )
  } catch (error) {
    const made = await Agent.find(agentId)
    if (made) await deleteAgent(made)
    throw error
  }
}

/** POST /agents/:id/clone: a new agent of the same owner from the agent's state now. */
export async function cloneAgent(user: { id: string }, agent: Agent) {
  return withWorkFolder(async (folder) => {
    const archive = join(folder, 'clone.tar.gz')
    await archiveAgent(agent, archive, { includeSecrets: true })
    return agentFromArchive(user, archive, { nameSuffix: ' (copy)' })
  })
}
