import { createHash, hkdfSync } from 'node:crypto'
import { join } from 'node:path'
import logger from '@adonisjs/core/services/logger'
import { appKey } from '#config/app'
import type Agent from '#agents/models/agent'
import { frameworkPlugin } from '#agents/services/agent_config'
import { decryptSecrets } from '#agents/services/config_secrets'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { ARCHIVE_FORMAT, FORMAT_VERSION } from '#backups/services/archive_format'
import type { FolderSource, WrittenArchive } from '#backups/services/archive_writer'
import { packApart, type PackPriority } from '#backups/services/archive_packer'
import { collectDocuments } from '#backups/services/agent_data'
import { precopyAgentFolders, settleAgentFolders } from '#backups/services/folder_snapshot'
import { withWorkFolder } from '#backups/services/backup_store'
import runtime from '#runtime/services/runtime'
import type { HostFolders } from '#runtime/types'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'

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
  fixed: Fixed & { leftOut: string[] },
  options: ArchiveOptions & { priority?: PackPriority }
): Promise<WrittenArchive> {
  const plugin = await frameworkPlugin(agent.framework)
  return packApart(
    target,
    {
      folders: fixed.folders,
      leftOut: fixed.leftOut,
      documents: fixed.documents,
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
    },
    options.priority
  )
}

/**
 * Writes the archive of `agent` to `target` from its folders as they are.
 * The caller holds its quiet window with the container down (an agent
 * asleep; a restore's pre-restore backup, which it packs `interactive`:
 * the agent is down until it is done), so folders and rows are of one
 * moment.
 */
export async function archiveAtRest(
  agent: Agent,
  target: string,
  options: ArchiveOptions & { priority?: PackPriority },
  host: HostFolders
) {
  const leftOut = await renderedSecrets(agent)
  const documents = await collectDocuments(agent, options)
  return packArchive(agent, target, { documents, folders: { host }, leftOut }, options)
}

/**
 * Where the agent's folders lie on this host (the runtime's hostFolders);
 * 503 saying why when a backup cannot reach them (docs/backups.md "Limits").
 */
export async function reachableFolders(agentId: string): Promise<HostFolders> {
  const found = await runtime.hostFolders(agentId)
  if ('unavailable' in found) {
    throw new ServiceUnavailableException(
      `Backups cannot reach this agent's folders here: ${found.unavailable}`
    )
  }
  return found
}

/** What an archive is packed from: the agent's rows and where its folders are read. */
interface Fixed {
  documents: Record<string, unknown>
  folders: FolderSource
}

/**
 * The framework's rendered files that hold secrets (mode 0600: Hermes'
 * .env with its gateway token and model key, the fixture's settings), by
 * archive name: left out of every archive whatever `includeSecrets` says
 * (secrets travel in the config, encrypted, or not at all). They are
 * rendered again from the config at the agent's next start.
 */
async function renderedSecrets(agent: Agent): Promise<string[]> {
  const plugin = await frameworkPlugin(agent.framework)
  const rendered = await plugin.renderFiles({
    agentId: agent.id,
    config: decryptSecrets(agent.config),
    // Placeholders: only which files it renders, and how, matters here.
    modelProxy: { baseUrl: 'http://127.0.0.1:9/v1', token: 'placeholder', model: 'placeholder' },
    driver: 'process',
    port: plugin.defaultPort,
    gatewayToken: 'placeholder-gateway-token-placeholder',
    paths: { state: '/state', workspace: '/workspace' },
  })
  return rendered
    .filter((file) => file.mode === 0o600 && !file.onlyIfMissing)
    .map((file) => `files/${file.root}/${file.path}`)
}

/**
 * Writes the archive of `agent` to `target`, of one moment
 * (docs/backups.md "Consistency"). A running agent's folders are copied
 * raw into a work folder while it runs; then, in its quiet window
 * (agentLifecycle.withAgentQuiet), it is frozen, its rows are read and the
 * copy is brought to the frozen moment (only what changed is copied again:
 * folder_snapshot.ts), and it runs on; the archive is packed from that copy
 * afterwards. An agent asleep (or one that cannot be frozen here, put to
 * sleep for it) is packed from its folders inside the window.
 */
export async function archiveAgent(
  agent: Agent,
  target: string,
  options: ArchiveOptions
): Promise<WrittenArchive> {
  const host = await reachableFolders(agent.id)
  const leftOut = await renderedSecrets(agent)
  return withWorkFolder(async (folder) => {
    const snapshot = join(folder, 'snapshot')
    // The first pass while it runs; an agent not running is archived where it lies.
    const precopyAt = performance.now()
    const precopy = (await runtime.isRunning(agent.id))
      ? await precopyAgentFolders(host, snapshot, leftOut)
      : undefined
    const precopyMs = Math.round(performance.now() - precopyAt)
    const fixed = await agentLifecycle.withAgentQuiet<Fixed | { written: WrittenArchive }>(
      agent.id,
      async (how) => {
        if (how === 'down') return { written: await archiveAtRest(agent, target, options, host) }
        const frozenAt = performance.now()
        const documents = await collectDocuments(agent, options)
        const copyAt = performance.now()
        // Frozen without a first pass (it started meanwhile): the whole copy now.
        const whole = precopy ? undefined : await precopyAgentFolders(host, snapshot, leftOut)
        const skipped = whole ? whole.skipped : await settleAgentFolders(host, precopy!, leftOut)
        const frozenMs = Math.round(performance.now() - frozenAt)
        const copyMs = Math.round(performance.now() - copyAt)
        // Its messages wait this long: longer than a second is worth an operator's look.
        logger[frozenMs > 1_000 ? 'warn' : 'info'](
          { agentId: agent.id, precopyMs, frozenMs, copyMs },
          'backups: agent frozen for the copy'
        )
        return { documents, folders: { snapshot, skipped } }
      },
      { freeze: true }
    )
    if ('written' in fixed) return fixed.written
    const packAt = performance.now()
    const written = await packArchive(agent, target, { ...fixed, leftOut }, options)
    const packMs = Math.round(performance.now() - packAt)
    logger.info({ agentId: agent.id, packMs, bytes: written.size }, 'backups: archive packed')
    return written
  })
}
