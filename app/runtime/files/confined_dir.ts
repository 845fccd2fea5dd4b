import { constants, existsSync } from 'node:fs'
import { lstat, mkdir, open, type FileHandle } from 'node:fs/promises'
import { relative, sep } from 'node:path'
import { ForbiddenException, ValidationException } from '#core/exceptions/api_exceptions'

/**
 * `openat`-style confinement for the file manager. Checking a path and then
 * opening it by name leaves a gap: the agent can swap a parent folder for a
 * symlink in between and the open lands outside its workspace. So every
 * operation walks from the workspace root one segment at a time, each
 * opened with O_NOFOLLOW relative to the folder opened before it (through
 * `/proc/self/fd/<fd>/<segment>`, which the kernel resolves against that
 * exact open folder, as openat(2) does). A segment swapped for a symlink
 * after the check is refused instead of followed.
 *
 * Node has no openat; the /proc magic link gives the same guarantee on
 * Linux. Elsewhere (no /proc) each segment is still opened with O_NOFOLLOW,
 * by full path.
 */
const PINNED_BY_PROC = existsSync('/proc/self/fd')

const DIRECTORY_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code
}

/** An open folder inside the workspace; `path(name)` names an entry of exactly that folder. */
export interface ConfinedDir {
  path(name?: string): string
  close(): Promise<void>
}

function pinned(handle: FileHandle, byName: string): ConfinedDir {
  const base = PINNED_BY_PROC ? `/proc/self/fd/${handle.fd}` : byName
  return {
    path: (name) => (name ? `${base}/${name}` : base),
    close: () => handle.close(),
  }
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
 * Opens the folder `real` (a checked, symlink-resolved path inside the real
 * workspace folder `workspace`) segment by segment. With `create`, missing
 * folders are made on the way. ENOENT goes to the caller.
 */
export async function openConfinedDir(
  workspace: string,
  real: string,
  options: { create?: boolean; display: string }
): Promise<ConfinedDir> {
  const rest = relative(workspace, real)
  if (rest.startsWith('..') || rest.startsWith(sep)) {
    throw new ForbiddenException('Path refused: outside the workspace')
  }
  let byName = workspace
  let dir = pinned(await open(workspace, DIRECTORY_FLAGS), byName)
  try {
    const segments = rest.split(sep).filter(Boolean)
    for (const [index, segment] of segments.entries()) {
      const next = dir.path(segment)
      if (options.create) {
        await mkdir(next).catch((error) => {
          if (errorCode(error) !== 'EEXIST') throw error
        })
      }
      let handle: FileHandle
      try {
        handle = await open(next, DIRECTORY_FLAGS)
      } catch (error) {
        if (errorCode(error) === 'ENOTDIR' || errorCode(error) === 'ELOOP') {
          await refuseSegment(next, index === segments.length - 1, options.display)
        }
        throw error
      }
      await dir.close()
      byName = `${byName}/${segment}`
      dir = pinned(handle, byName)
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
  options: { create?: boolean; display: string },
  work: (dir: ConfinedDir) => Promise<T>
): Promise<T> {
  const dir = await openConfinedDir(workspace, real, options)
  try {
    return await work(dir)
  } finally {
    await dir.close()
  }
}
