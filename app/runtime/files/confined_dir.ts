import { constants, existsSync } from 'node:fs'
import {
  lchown,
  lstat,
  mkdir,
  open,
  readdir,
  realpath,
  rename,
  rmdir,
  symlink,
  unlink,
  type FileHandle,
} from 'node:fs/promises'
import { randomBytes } from 'node:crypto'
import { relative, sep } from 'node:path'
import { ForbiddenException, ValidationException } from '#core/exceptions/api_exceptions'

/**
 * The one way the service touches a folder an agent can change (its
 * workspace, state, home, tmp, cache; docs/security.md "Agent folders").
 *
 * Checking a path and then using it by name leaves a gap: the agent can
 * swap a folder or file for a symbolic link in between, and the service,
 * running as root, would read, write, chown or delete wherever it points.
 * So every operation walks from a trusted folder (one the agent cannot
 * change, such as the agents folder) one segment at a time, each opened
 * with O_NOFOLLOW relative to the folder opened before it (through
 * `/proc/self/fd/<fd>/<segment>`, which the kernel resolves against that
 * exact open folder, as openat(2) does), and acts on the final descriptor
 * (fchown, fchmod, read, write) or on a name inside a pinned folder with
 * calls that never follow the last segment (lchown, unlink, rmdir, rename).
 * A link swapped in at any point is refused or removed, never followed.
 *
 * Node has no openat; the /proc magic link gives the same guarantee on
 * Linux. Elsewhere (no /proc) each segment is still opened with O_NOFOLLOW,
 * by full path.
 */
const PINNED_BY_PROC = existsSync('/proc/self/fd')

const DIRECTORY_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW
/** O_NONBLOCK: opening a FIFO the agent put there must not hang the service. */
const FILE_READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK

/** Deepest folder tree walked by chownTree / removeTree (each level holds one descriptor). */
const MAX_DEPTH = 128

export interface Owner {
  uid: number
  gid: number
}

/** How a missing folder is made on the way. */
export interface FolderCreation {
  mode: number
  owner?: Owner
  /** A link or a file where a folder belongs is removed (never followed) and the folder made. */
  replace?: boolean
}

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code
}

/** True for the errors an O_NOFOLLOW | O_DIRECTORY open gives on a link or a non-folder. */
export function isNotAFolder(error: unknown): boolean {
  return errorCode(error) === 'ELOOP' || errorCode(error) === 'ENOTDIR'
}

/** An open folder; `path(name)` names an entry of exactly that folder. */
export class PinnedDir {
  private constructor(
    private readonly handle: FileHandle,
    private readonly byName: string
  ) {}

  /**
   * Opens a folder the agent cannot change (its path may hold the host's
   * own links, such as /tmp on some systems).
   */
  static async trusted(path: string): Promise<PinnedDir> {
    return new PinnedDir(await open(path, constants.O_RDONLY | constants.O_DIRECTORY), path)
  }

  get fd(): number {
    return this.handle.fd
  }

  path(name?: string): string {
    const base = PINNED_BY_PROC ? `/proc/self/fd/${this.handle.fd}` : this.byName
    return name ? `${base}/${name}` : base
  }

  stat() {
    return this.handle.stat()
  }

  chown(owner: Owner) {
    return this.handle.chown(owner.uid, owner.gid)
  }

  chmod(mode: number) {
    return this.handle.chmod(mode)
  }

  close(): Promise<void> {
    return this.handle.close()
  }

  /**
   * Opens the entry `name` of this folder, never through a link (ELOOP or
   * ENOTDIR for a link or a file). With `create`, a missing folder is made
   * with that mode (exactly, umask aside) and owner.
   */
  async child(name: string, create?: FolderCreation): Promise<PinnedDir> {
    assertName(name)
    if (create?.replace) {
      try {
        return await this.child(name, { ...create, replace: false })
      } catch (error) {
        if (!isNotAFolder(error)) throw error
        await removeIn(this, name)
        return this.child(name, { ...create, replace: false })
      }
    }
    let made = false
    if (create) {
      made = await mkdir(this.path(name), create.mode).then(
        () => true,
        (error) => {
          if (errorCode(error) !== 'EEXIST') throw error
          return false
        }
      )
    }
    const dir = new PinnedDir(
      await open(this.path(name), DIRECTORY_FLAGS),
      `${this.byName}/${name}`
    )
    if (made && create) {
      try {
        if (create.owner) await dir.chown(create.owner)
        await dir.chmod(create.mode)
      } catch (error) {
        await dir.close()
        throw error
      }
    }
    return dir
  }

  /** child() along a relative path (`a/b/c`); the folders on the way are closed. */
  async walk(path: string, create?: FolderCreation): Promise<PinnedDir> {
    let dir: PinnedDir = this
    try {
      for (const segment of segmentsOf(path)) {
        const next = await dir.child(segment, create)
        if (dir !== this) await dir.close()
        dir = next
      }
      return dir
    } catch (error) {
      if (dir !== this) await dir.close().catch(() => {})
      throw error
    }
  }
}

function segmentsOf(path: string): string[] {
  return path.split('/').filter((segment) => segment !== '' && segment !== '.')
}

function assertName(name: string) {
  if (!name || name === '.' || name === '..' || name.includes('/')) {
    throw new Error(`Not a single path segment: ${JSON.stringify(name)}`)
  }
}

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

/**
 * Removes the entry `name` of a pinned folder and, for a folder, all it
 * holds, each level opened without following links: a link is removed
 * itself, and a folder swapped for a link mid-way is unlinked, never
 * descended into. Missing is fine. Folders deeper than MAX_DEPTH are moved
 * up beside `name` and removed in their turn (one descriptor per level).
 */
export async function removeIn(dir: PinnedDir, name: string): Promise<void> {
  assertName(name)
  const deferred: string[] = []
  await removeEntry(dir, name, 0, { top: dir, deferred })
  while (deferred.length > 0) await removeEntry(dir, deferred.pop()!, 0, { top: dir, deferred })
}

async function removeEntry(
  dir: PinnedDir,
  name: string,
  depth: number,
  removal: { top: PinnedDir; deferred: string[] },
  retries = 0
): Promise<void> {
  const info = await lstat(dir.path(name)).catch((error) => {
    if (errorCode(error) === 'ENOENT') return undefined
    throw error
  })
  if (!info) return
  // Swapped between the look and the act: look again, a few times.
  const again = () => removeEntry(dir, name, depth, removal, retries + 1)
  if (!info.isDirectory()) {
    await unlink(dir.path(name)).catch((error) => {
      if (errorCode(error) === 'EISDIR' && retries < 3) return again()
      if (errorCode(error) !== 'ENOENT') throw error
    })
    return
  }
  if (depth >= MAX_DEPTH) {
    const moved = `.removing-${randomBytes(6).toString('hex')}`
    await rename(dir.path(name), removal.top.path(moved))
    removal.deferred.push(moved)
    return
  }
  let child: PinnedDir
  try {
    child = await dir.child(name)
  } catch (error) {
    if (isNotAFolder(error) && retries < 3) return again()
    if (errorCode(error) === 'ENOENT') return
    throw error
  }
  try {
    for (const entry of await readdir(child.path())) {
      await removeEntry(child, entry, depth + 1, removal)
    }
  } finally {
    await child.close()
  }
  await rmdir(dir.path(name)).catch((error) => {
    if (errorCode(error) !== 'ENOENT') throw error
  })
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
