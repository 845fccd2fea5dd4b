import { constants, createReadStream } from 'node:fs'
import { lstat, mkdir, open, readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { agentPaths } from '#runtime/agent_paths'
import { removeBelow } from '#runtime/files/confined_dir'
import { PinnedDir, removeIn, segmentsOf, type Owner } from '#runtime/files/pinned_dir'
import type { AgentFolderName, HostFolders } from '#runtime/types'
import { ARCHIVED_FOLDERS } from '#backups/services/archive_format'

/** New files only, never through a link (the folders were just emptied, but the rule is the rule). */
const CREATE_FLAGS =
  constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW
const MAX_DEPTH = 128

/**
 * Copies the service's own unpacked tree `source` into the agent's pinned
 * folder `dest`: folders through their descriptors, files created
 * exclusively without following links, owned by `owner` when given (a
 * container's user). Without it they stay the service's: the process
 * driver hands the agent's folders to its uid before every start.
 */
async function copyTree(
  source: string,
  dest: PinnedDir,
  owner: Owner | undefined,
  depth: number
): Promise<void> {
  if (depth > MAX_DEPTH) return
  for (const entry of await readdir(source)) {
    const from = join(source, entry)
    const info = await lstat(from)
    const mode = info.mode & 0o777
    if (info.isDirectory()) {
      const child = await dest.child(entry, { mode: mode | 0o700, owner })
      try {
        await copyTree(from, child, owner, depth + 1)
      } finally {
        await child.close()
      }
    } else if (info.isFile()) {
      const handle = await open(dest.path(entry), CREATE_FLAGS, mode)
      try {
        await handle.writeFile(createReadStream(from))
        if (owner) await handle.chown(owner.uid, owner.gid)
        await handle.chmod(mode)
      } finally {
        await handle.close()
      }
    }
  }
}

/** Paths (below the folder at `path`) of other folders that lie inside it: kept as they are. */
function nestedIn(path: string, folders: HostFolders['folders']): Set<string> {
  const inside = new Set<string>()
  const prefix = path === '' ? '' : `${path}/`
  for (const other of Object.values(folders)) {
    if (other !== undefined && other !== path && other.startsWith(prefix)) {
      inside.add(segmentsOf(other.slice(prefix.length))[0])
    }
  }
  return inside
}

/**
 * Empties the folder `path` below `root` and answers it open, made (with
 * its parents) where it is missing and made again where the agent put a
 * link or a file there; entries holding another of the agent's folders
 * stay (the docker volume is the state, its `workspace/` the workspace).
 */
async function emptiedFolder(
  root: PinnedDir,
  path: string,
  folders: HostFolders['folders'],
  owner: Owner | undefined
): Promise<PinnedDir> {
  const creation = { mode: 0o700, owner, replace: true }
  const dir = path === '' ? root : await root.walk(path, creation)
  const kept = nestedIn(path, folders)
  for (const entry of await readdir(dir.path())) {
    if (!kept.has(entry)) await removeIn(dir, entry)
  }
  return dir
}

/**
 * Replaces the agent's folders (workspace, state, home), where `host`
 * says they lie, by those of the unpacked archive in `staging`
 * (`files/<folder>/`), while its container is down. A folder the archive
 * does not hold, or the driver keeps none of, is left as it is. Every step
 * walks from `host.root` without following links.
 */
export async function writeAgentFolders(host: HostFolders, staging: string): Promise<void> {
  // A new installation's agents folder is made with its first agent (as the runtime makes it).
  await mkdir(host.root, { recursive: true, mode: 0o711 })
  const root = await PinnedDir.trusted(host.root)
  try {
    for (const folder of ARCHIVED_FOLDERS as readonly AgentFolderName[]) {
      const path = host.folders[folder]
      const source = join(staging, 'files', folder)
      const info = await stat(source).catch(() => undefined)
      if (path === undefined || !info?.isDirectory()) continue
      const dest = await emptiedFolder(root, path, host.folders, host.owner)
      try {
        await copyTree(source, dest, host.owner, 0)
      } finally {
        if (dest !== root) await dest.close()
      }
    }
  } finally {
    await root.close()
  }
}

/**
 * Deletes the agent's sleep checkpoint (process driver): after a restore
 * its memory would not match the restored files, so the agent boots.
 */
export async function discardCheckpoint(agentsDir: string, agentId: string): Promise<void> {
  await removeBelow(agentsDir, agentPaths(agentsDir, agentId).checkpoint)
}
