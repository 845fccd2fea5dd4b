import { constants, type Stats } from 'node:fs'
import { open, readdir, type FileHandle } from 'node:fs/promises'
import { errorCode, isNotAFolder, type PinnedDir } from '#runtime/files/pinned_dir'
import type { HostFolders } from '#runtime/types'
import { ARCHIVED_FOLDERS } from '#backups/services/archive_format'

/**
 * The one walk of an agent's folders a backup makes (the archive writer,
 * and the snapshot a frozen agent is copied to): every folder through its
 * pinned descriptor, every file opened without following a link, so a
 * link the agent planted, or swapped in mid-walk, is left out and never
 * followed (docs/security.md "Agent folders"). Only regular files and
 * folders are visited; links, sockets, FIFOs and devices are listed as
 * skipped by their archive name.
 */

/** O_NONBLOCK: a FIFO the agent put in its folders must not hang the backup. */
const FILE_READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK
/** Deepest folder tree walked (each level holds one descriptor while it is walked). */
const MAX_DEPTH = 128

/** What a walk does with what it finds; `C` stands for a folder of the copy (the writer has none). */
export interface TreeVisitor<C> {
  /** The folder `name` (its archive name, `files/workspace/a`) inside `parent`: answers its own `C`. */
  folder(name: string, entry: string, mode: number, parent: C): Promise<C>
  /** The regular file `name`, open (read-only, never through a link) with its stat. */
  file(name: string, entry: string, handle: FileHandle, info: Stats, parent: C): Promise<void>
}

/** How a snapshot (and the process driver) lays the folders out: one of each below the top. */
export const SEPARATE_FOLDERS: HostFolders['folders'] = {
  workspace: 'workspace',
  state: 'state',
  home: 'home',
}

/**
 * Archive names of folders that lie inside another one (a docker volume is
 * the state, its `workspace/` the workspace): walked as their own, passed
 * over (not skipped) in the one holding them.
 */
function nestedFolders(folders: HostFolders['folders']): Set<string> {
  const nested = new Set<string>()
  for (const outer of ARCHIVED_FOLDERS) {
    const outside = folders[outer]
    if (outside === undefined) continue
    for (const inner of ARCHIVED_FOLDERS) {
      const inside = folders[inner]
      if (inner === outer || inside === undefined) continue
      const prefix = outside === '' ? '' : `${outside}/`
      if (inside !== outside && inside.startsWith(prefix)) {
        nested.add(`files/${outer}/${inside.slice(prefix.length)}`)
      }
    }
  }
  return nested
}

/**
 * Walks the archived folders (workspace, state, home) where `folders`
 * puts them below `root` (opened from a folder the agent cannot change: the
 * agents folder, a volume's mount point, a snapshot), as
 * `files/<folder>/...`; `context` stands for the copy's top. A folder that
 * is missing, or a link or a file, is left out, and so are the entries
 * named in `leftOut`. Answers the entries skipped.
 */
export async function walkAgentFolders<C>(
  root: PinnedDir,
  folders: HostFolders['folders'],
  context: C,
  visitor: TreeVisitor<C>,
  leftOut: ReadonlySet<string> = new Set()
): Promise<string[]> {
  const skipped: string[] = []
  const walk = { visitor, skipped, leftOut, passOver: nestedFolders(folders) }
  for (const folder of ARCHIVED_FOLDERS) {
    const path = folders[folder]
    if (path === undefined) continue
    const own =
      path === ''
        ? root
        : await root.walk(path).catch((error) => {
            if (errorCode(error) === 'ENOENT' || isNotAFolder(error)) return undefined
            throw error
          })
    if (!own) continue
    try {
      const name = `files/${folder}`
      const inner = await visitor.folder(name, folder, 0o700, context)
      await walkTree(own, name, inner, walk, 0)
    } finally {
      if (own !== root) await own.close()
    }
  }
  return skipped
}

interface Walk<C> {
  visitor: TreeVisitor<C>
  skipped: string[]
  leftOut: ReadonlySet<string>
  passOver: ReadonlySet<string>
}

async function walkTree<C>(
  dir: PinnedDir,
  prefix: string,
  context: C,
  walk: Walk<C>,
  depth: number
): Promise<void> {
  const { visitor, skipped } = walk
  const entries = await readdir(dir.path(), { withFileTypes: true })
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  for (const entry of entries) {
    const name = `${prefix}/${entry.name}`
    if (walk.passOver.has(name)) continue
    if (walk.leftOut.has(name)) {
      skipped.push(name)
    } else if (entry.isDirectory()) {
      if (depth >= MAX_DEPTH) {
        skipped.push(name)
        continue
      }
      let child: PinnedDir
      try {
        child = await dir.child(entry.name)
      } catch (error) {
        // Swapped for a link or a file since the listing: left out.
        if (isNotAFolder(error) || errorCode(error) === 'ENOENT') {
          skipped.push(name)
          continue
        }
        throw error
      }
      try {
        const info = await child.stat()
        const inner = await visitor.folder(name, entry.name, info.mode & 0o777, context)
        await walkTree(child, name, inner, walk, depth + 1)
      } finally {
        await child.close()
      }
    } else if (!entry.isFile() || !(await visitFile(dir, entry.name, name, context, visitor))) {
      skipped.push(name)
    }
  }
}

/** Opens the file without following a link and hands it over; false when it is not a regular file. */
async function visitFile<C>(
  dir: PinnedDir,
  entry: string,
  name: string,
  context: C,
  visitor: TreeVisitor<C>
): Promise<boolean> {
  let handle: FileHandle
  try {
    handle = await open(dir.path(entry), FILE_READ_FLAGS)
  } catch (error) {
    if (['ELOOP', 'ENOENT', 'ENXIO'].includes(errorCode(error) ?? '')) return false
    throw error
  }
  try {
    const info = await handle.stat()
    if (!info.isFile()) return false
    await visitor.file(name, entry, handle, info, context)
    return true
  } finally {
    await handle.close()
  }
}
