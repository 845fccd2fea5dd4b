import { constants } from 'node:fs'
import {
  lchown,
  lstat,
  open,
  readdir,
  realpath,
  rename,
  symlink,
  unlink,
  type FileHandle,
} from 'node:fs/promises'
import { randomBytes } from 'node:crypto'
import { relative, sep } from 'node:path'
import { ForbiddenException, ValidationException } from '#core/exceptions/api_exceptions'
import {
  assertName,
  errorCode,
  isNotAFolder,
  MAX_DEPTH,
  PinnedDir,
  removeIn,
  segmentsOf,
  type FolderCreation,
  type Owner,
} from '#runtime/files/pinned_dir'

export type { FolderCreation, Owner } from '#runtime/files/pinned_dir'

/** O_NONBLOCK: opening a FIFO the agent put there must not hang the service. */
const FILE_READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK

/**
 * Operations on the folders an agent can change, from a trusted folder
 * down (docs/security.md "Agent folders"): each walks one segment at a
 * time without following links (PinnedDir, app/runtime/files/pinned_dir.ts,
 * says how) and acts on the final descriptor or on a name in a pinned
 * folder: write, read, remove, chown, link; and the file manager's walk
 * inside a workspace (openConfinedDir).
 */

/**
 * Opens the folder `relativePath` below the trusted folder `base`, every
 * segment without following links; `create` makes missing ones.
 */
export async function openBelow(
  base: string,
  relativePath: string,
  create?: FolderCreation
): Promise<PinnedDir> {
  const root = await PinnedDir.trusted(base)
  if (segmentsOf(relativePath).length === 0) return root
  try {
    return await root.walk(relativePath, create)
  } finally {
    await root.close()
  }
}

/** Runs `work` with a folder opened by openBelow, closing it after. */
export async function inFolderBelow<T>(
  base: string,
  relativePath: string,
  create: FolderCreation | undefined,
  work: (dir: PinnedDir) => Promise<T>
): Promise<T> {
  const dir = await openBelow(base, relativePath, create)
  try {
    return await work(dir)
  } finally {
    await dir.close()
  }
}

/** `base` and `path` (absolute, below it) as the trusted folder and the rest. */
function split(base: string, path: string): string {
  const rest = relative(base, path)
  if (rest.startsWith('..') || rest.startsWith(sep)) {
    throw new Error(`${path} is not below ${base}`)
  }
  return rest
}

function parentAndName(path: string): { parent: string; name: string } {
  const segments = segmentsOf(path)
  const name = segments.pop()
  if (!name) throw new Error('A file path needs a name')
  return { parent: segments.join('/'), name }
}

/**
 * Writes a file at `path` (below the trusted `base`) whole: staged beside
 * it and renamed over it, so a link at that name is replaced, never
 * written through, and a crash never leaves half a file. The file gets
 * `mode` and `owner` on its own descriptor; missing folders on the way are
 * made with `folderMode` and `owner` (a link or file in the way of one is
 * replaced: these are the service's paths). `onlyIfMissing`: an existing entry
 * (even a link) is left alone. Returns false when it was left alone.
 */
export async function writeFileBelow(
  base: string,
  path: string,
  content: string | Buffer,
  options: { mode: number; owner?: Owner; folderMode?: number; onlyIfMissing?: boolean }
): Promise<boolean> {
  const { parent, name } = parentAndName(split(base, path))
  return inFolderBelow(
    base,
    parent,
    { mode: options.folderMode ?? 0o700, owner: options.owner, replace: true },
    async (dir) => {
      if (options.onlyIfMissing && (await lstat(dir.path(name)).catch(() => undefined))) {
        return false
      }
      await writeFileIn(dir, name, content, options)
      return true
    }
  )
}

/** writeFileBelow's write, in a folder already pinned. */
export async function writeFileIn(
  dir: PinnedDir,
  name: string,
  content: string | Buffer,
  options: { mode: number; owner?: Owner }
): Promise<void> {
  assertName(name)
  const staged = `.${name.slice(0, 200)}.${randomBytes(6).toString('hex')}.partial`
  const handle = await open(
    dir.path(staged),
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    0o600
  )
  try {
    try {
      await handle.writeFile(content)
      if (options.owner) await handle.chown(options.owner.uid, options.owner.gid)
      await handle.chmod(options.mode)
    } finally {
      await handle.close()
    }
    await rename(dir.path(staged), dir.path(name))
  } catch (error) {
    await unlink(dir.path(staged)).catch(() => {})
    throw error
  }
}

/**
 * The bytes of the regular file `path` below `base`, never through a link;
 * undefined when it is missing, a link, not a regular file or larger than
 * `maxBytes`.
 */
export async function readFileBelow(
  base: string,
  path: string,
  maxBytes: number
): Promise<Buffer | undefined> {
  const { parent, name } = parentAndName(split(base, path))
  let dir: PinnedDir
  try {
    dir = await openBelow(base, parent)
  } catch (error) {
    if (isNotAFolder(error) || errorCode(error) === 'ENOENT') return undefined
    throw error
  }
  try {
    let handle: FileHandle
    try {
      handle = await open(dir.path(name), FILE_READ_FLAGS)
    } catch (error) {
      if (['ENOENT', 'ELOOP', 'ENXIO'].includes(errorCode(error) ?? '')) return undefined
      throw error
    }
    try {
      const info = await handle.stat()
      if (!info.isFile() || info.size > maxBytes) return undefined
      return await handle.readFile()
    } finally {
      await handle.close()
    }
  } finally {
    await dir.close()
  }
}

/** removeIn for `path` below the trusted `base`. */
export async function removeBelow(base: string, path: string): Promise<void> {
  const { parent, name } = parentAndName(split(base, path))
  let dir: PinnedDir
  try {
    dir = await openBelow(base, parent)
  } catch (error) {
    if (isNotAFolder(error) || errorCode(error) === 'ENOENT') return
    throw error
  }
  try {
    await removeIn(dir, name)
  } finally {
    await dir.close()
  }
}

/**
 * Gives the folder `path` below `base` and everything in it to `owner`:
 * folders through their own descriptors, other entries with lchown (a link
 * itself, never what it points to); never descends through a link.
 */
export async function chownTreeBelow(base: string, path: string, owner: Owner): Promise<void> {
  const dir = await openBelow(base, split(base, path))
  try {
    await chownPinned(dir, owner, 0)
  } finally {
    await dir.close()
  }
}

async function chownPinned(dir: PinnedDir, owner: Owner, depth: number): Promise<void> {
  await dir.chown(owner)
  if (depth >= MAX_DEPTH) return
  for (const entry of await readdir(dir.path(), { withFileTypes: true })) {
    if (entry.isDirectory()) {
      let child: PinnedDir
      try {
        child = await dir.child(entry.name)
      } catch (error) {
        // Swapped for a link or a file since the listing: that entry itself.
        if (isNotAFolder(error)) await lchown(dir.path(entry.name), owner.uid, owner.gid)
        else if (errorCode(error) !== 'ENOENT') throw error
        continue
      }
      try {
        await chownPinned(child, owner, depth + 1)
      } finally {
        await child.close()
      }
    } else {
      await lchown(dir.path(entry.name), owner.uid, owner.gid).catch((error) => {
        if (errorCode(error) !== 'ENOENT') throw error
      })
    }
  }
}

/** Makes `path` below `base` a link to `target`, replacing whatever entry had that name. */
export async function symlinkBelow(
  base: string,
  path: string,
  target: string,
  folders: FolderCreation
): Promise<void> {
  const { parent, name } = parentAndName(split(base, path))
  await inFolderBelow(base, parent, folders, async (dir) => {
    await removeIn(dir, name)
    await symlink(target, dir.path(name))
  })
}

/** An open folder inside the workspace (the file manager's view of PinnedDir). */
export interface ConfinedDir {
  path(name?: string): string
  close(): Promise<void>
}

async function refuseSegment(path: string, last: boolean, display: string): Promise<never> {
  const info = await lstat(path).catch(() => undefined)
  if (info?.isSymbolicLink()) {
    throw new ForbiddenException('Path refused: symbolic link pointing outside the workspace')
  }
  throw new ValidationException(
    last ? `${display} is not a directory` : `a parent of ${display} is a file`
  )
}

/**
 * Opens the folder `real` (a checked, symlink-resolved path inside the
 * workspace folder `workspace`) segment by segment. With `trustedBase` (a
 * folder the agent cannot change, above the workspace) the walk starts
 * there, so the workspace folder itself is never reached through a link
 * either. With `create`, missing folders are made on the way (with
 * `owner`). ENOENT goes to the caller.
 */
export async function openConfinedDir(
  workspace: string,
  real: string,
  options: { create?: boolean; display: string; trustedBase?: string; owner?: Owner }
): Promise<ConfinedDir> {
  const rest = relative(workspace, real)
  if (rest.startsWith('..') || rest.startsWith(sep)) {
    throw new ForbiddenException('Path refused: outside the workspace')
  }
  let dir: PinnedDir
  try {
    const base = options.trustedBase && (await realpath(options.trustedBase))
    dir = base ? await openBelow(base, split(base, workspace)) : await PinnedDir.trusted(workspace)
  } catch (error) {
    if (isNotAFolder(error)) {
      throw new ForbiddenException('Path refused: the workspace is not a folder of its own')
    }
    throw error
  }
  try {
    const segments = segmentsOf(rest.split(sep).join('/'))
    for (const [index, segment] of segments.entries()) {
      let next: PinnedDir
      try {
        next = await dir.child(
          segment,
          options.create ? { mode: 0o755, owner: options.owner } : undefined
        )
      } catch (error) {
        if (isNotAFolder(error)) {
          await refuseSegment(dir.path(segment), index === segments.length - 1, options.display)
        }
        throw error
      }
      await dir.close()
      dir = next
    }
    return dir
  } catch (error) {
    await dir.close().catch(() => {})
    throw error
  }
}

/** Runs `work` with the confined folder open, closing it after. */
export async function inConfinedDir<T>(
  workspace: string,
  real: string,
  options: { create?: boolean; display: string; trustedBase?: string; owner?: Owner },
  work: (dir: ConfinedDir) => Promise<T>
): Promise<T> {
  const dir = await openConfinedDir(workspace, real, options)
  try {
    return await work(dir)
  } finally {
    await dir.close()
  }
}
