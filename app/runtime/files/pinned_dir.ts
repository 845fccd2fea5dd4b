import { constants, existsSync } from 'node:fs'
import {
  lstat,
  mkdir,
  open,
  readdir,
  rename,
  rmdir,
  unlink,
  type FileHandle,
} from 'node:fs/promises'
import { randomBytes } from 'node:crypto'

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

/** Deepest folder tree walked by chownTree / removeTree (each level holds one descriptor). */
export const MAX_DEPTH = 128

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

export function errorCode(error: unknown): string | undefined {
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

export function segmentsOf(path: string): string[] {
  return path.split('/').filter((segment) => segment !== '' && segment !== '.')
}

export function assertName(name: string) {
  if (!name || name === '.' || name === '..' || name.includes('/')) {
    throw new Error(`Not a single path segment: ${JSON.stringify(name)}`)
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
