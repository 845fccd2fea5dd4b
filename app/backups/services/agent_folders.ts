import { constants, createReadStream } from 'node:fs'
import { lstat, open, readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { agentPaths, ensureAgentFolders } from '#runtime/agent_paths'
import { openBelow, removeBelow } from '#runtime/files/confined_dir'
import { removeIn, type PinnedDir } from '#runtime/files/pinned_dir'
import { ARCHIVED_FOLDERS } from '#backups/services/archive_format'

/** New files only, never through a link (the folders are fresh, but the rule is the rule). */
const CREATE_FLAGS =
  constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW
const MAX_DEPTH = 128

/**
 * Copies the service's own unpacked tree `source` into the agent's pinned
 * folder `dest`, which was just made empty: folders through their
 * descriptors, files created exclusively without following links.
 * Ownership stays the service's: the runtime hands the agent's folders to
 * its uid before every start.
 */
async function copyTree(source: string, dest: PinnedDir, depth: number): Promise<void> {
  if (depth > MAX_DEPTH) return
  for (const entry of await readdir(source)) {
    const from = join(source, entry)
    const info = await lstat(from)
    const mode = info.mode & 0o777
    if (info.isDirectory()) {
      const child = await dest.child(entry, { mode: mode | 0o700 })
      try {
        await copyTree(from, child, depth + 1)
      } finally {
        await child.close()
      }
    } else if (info.isFile()) {
      const handle = await open(dest.path(entry), CREATE_FLAGS, mode)
      try {
        await handle.writeFile(createReadStream(from))
        await handle.chmod(mode)
      } finally {
        await handle.close()
      }
    }
  }
}

/**
 * Replaces the agent's folders (workspace, state, home) by those of the
 * unpacked archive in `staging` (`files/<folder>/`), while its container
 * is down. A folder the archive does not hold is left as it is. Every
 * step walks from the agents folder without following links.
 */
export async function writeAgentFolders(
  agentsDir: string,
  agentId: string,
  staging: string
): Promise<void> {
  await ensureAgentFolders(agentPaths(agentsDir, agentId))
  const top = await openBelow(agentsDir, agentId)
  try {
    for (const folder of ARCHIVED_FOLDERS) {
      const source = join(staging, 'files', folder)
      const info = await stat(source).catch(() => undefined)
      if (!info?.isDirectory()) continue
      await removeIn(top, folder)
      const dest = await top.child(folder, { mode: 0o700 })
      try {
        await copyTree(source, dest, 0)
      } finally {
        await dest.close()
      }
    }
  } finally {
    await top.close()
  }
}

/**
 * Deletes the agent's sleep checkpoint (process driver): after a restore
 * its memory would not match the restored files, so the agent boots.
 */
export async function discardCheckpoint(agentsDir: string, agentId: string): Promise<void> {
  await removeBelow(agentsDir, agentPaths(agentsDir, agentId).checkpoint)
}
