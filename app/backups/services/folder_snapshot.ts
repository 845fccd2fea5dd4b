import { constants, createWriteStream, existsSync, type Stats } from 'node:fs'
import {
  chmod,
  copyFile,
  lstat,
  mkdir,
  readdir,
  rm,
  unlink,
  utimes,
  type FileHandle,
} from 'node:fs/promises'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { PinnedDir } from '#runtime/files/pinned_dir'
import type { HostFolders } from '#runtime/types'
import { walkAgentFolders } from '#backups/services/folder_walk'

/**
 * Raw copy of a running agent's folders (docs/backups.md "Consistency"),
 * into `dest` (`<dest>/workspace/...`), a private folder of the service's,
 * from which the archive is packed, hashed and compressed afterwards, off
 * the agent's clock. Two passes, so the agent is frozen only for what
 * changed:
 *
 * 1. `precopy`, the agent running: everything is copied, and each file's
 *    identity noted (inode, size, modification and change times).
 * 2. `settle`, the agent frozen: the folders are walked again; a file whose
 *    identity is the noted one and whose change time is older than the
 *    first pass's start (less a second, as the kernel's clock is coarse)
 *    was not written since it was copied and is kept; every other file is
 *    copied again, and what is gone is removed from the copy. What the copy
 *    holds then is the frozen moment.
 *
 * A write changes a file's change time (ctime), which no call of the agent
 * can set back, so an unchanged identity with an old ctime is an unchanged
 * file. Both passes walk as the archive does (folder_walk.ts): nothing the
 * agent planted is followed. A file is copied by the kernel
 * (copy_file_range) from the descriptor the walk opened without following
 * a link, through its /proc/self/fd magic link: that names the open file
 * itself, never a path the agent could change. Without /proc it is streamed
 * from the same descriptor. Only a service running as root freezes agents
 * (cgroups), so permission bits never keep it from reading its own copy.
 */
const BY_DESCRIPTOR = existsSync('/proc/self/fd')
/** How far back a change time counts as "maybe after the first pass" (the kernel's clock is coarse). */
const CLOCK_SLACK_MS = 1000

/** What the first pass noted of a file, by archive name. */
interface Identity {
  dev: number
  ino: number
  size: number
  mtimeMs: number
  ctimeMs: number
}

export interface Precopy {
  dest: string
  startedAt: number
  files: Map<string, Identity>
  /** The entries it left out (as the second pass answers them). */
  skipped: string[]
}

async function copyOpenFile(handle: FileHandle, dest: string, mode: number): Promise<void> {
  if (BY_DESCRIPTOR) {
    await copyFile(`/proc/self/fd/${handle.fd}`, dest, constants.COPYFILE_EXCL)
  } else {
    await pipeline(
      handle.createReadStream({ start: 0, autoClose: false }),
      createWriteStream(dest, { flags: 'wx', mode })
    )
  }
}

function identityOf(info: Stats): Identity {
  const { dev, ino, size, mtimeMs, ctimeMs } = info
  return { dev, ino, size, mtimeMs, ctimeMs }
}

function unchanged(noted: Identity | undefined, info: Stats, since: number): boolean {
  return (
    noted !== undefined &&
    noted.dev === info.dev &&
    noted.ino === info.ino &&
    noted.size === info.size &&
    noted.mtimeMs === info.mtimeMs &&
    noted.ctimeMs === info.ctimeMs &&
    info.ctimeMs < since - CLOCK_SLACK_MS
  )
}

/**
 * One pass over the agent's folders into `dest`: files `keep` says are
 * already there are left, others copied (over what was there); answers
 * the entries the walk left out and the names it found.
 */
async function pass(
  host: HostFolders,
  dest: string,
  leftOut: string[],
  keep: (name: string, info: Stats) => boolean,
  noted?: Map<string, Identity>
): Promise<{ skipped: string[]; seen: Set<string> }> {
  const seen = new Set<string>()
  const root = await PinnedDir.trusted(host.root)
  try {
    const skipped = await walkAgentFolders(
      root,
      host.folders,
      dest,
      {
        folder: async (name, entry, mode, parent) => {
          const path = join(parent, entry)
          seen.add(name)
          const there = await lstat(path).catch(() => undefined)
          if (there && !there.isDirectory()) await unlink(path)
          if (!there?.isDirectory()) await mkdir(path)
          // Exactly the agent's bits (mkdir's are masked by the umask); the service runs as root.
          // Unchanged, nothing is written: a frozen pass makes no metadata write it can avoid.
          if (!there?.isDirectory() || (there.mode & 0o777) !== mode) await chmod(path, mode)
          return path
        },
        file: async (name, entry, handle, info, parent) => {
          seen.add(name)
          noted?.set(name, identityOf(info))
          if (keep(name, info)) return
          const path = join(parent, entry)
          await rm(path, { recursive: true, force: true })
          await copyOpenFile(handle, path, info.mode & 0o777)
          await chmod(path, info.mode & 0o777)
          await utimes(path, info.atime, info.mtime)
        },
      },
      new Set(leftOut)
    )
    return { skipped, seen }
  } finally {
    await root.close()
  }
}

/** Removes from the copy what the last pass did not find (deleted, or now a link). */
async function prune(dir: string, prefix: string, seen: Set<string>): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const name = `${prefix}/${entry.name}`
    const path = join(dir, entry.name)
    if (!seen.has(name)) await rm(path, { recursive: true, force: true })
    else if (entry.isDirectory()) await prune(path, name, seen)
  }
}

/**
 * The first pass, the agent running: copies its folders, where `host`
 * says they lie, into `dest` (which must not exist yet; one folder each,
 * as SEPARATE_FOLDERS), all but `leftOut` (archive names).
 */
export async function precopyAgentFolders(
  host: HostFolders,
  dest: string,
  leftOut: string[]
): Promise<Precopy> {
  const startedAt = Date.now()
  await mkdir(dest, { mode: 0o700 })
  const files = new Map<string, Identity>()
  const { skipped } = await pass(host, dest, leftOut, () => false, files)
  return { dest, startedAt, files, skipped }
}

/**
 * The second pass, the agent frozen: makes the copy the folders as they
 * are now (see above). Answers the entries left out (`leftOut`, and links,
 * sockets, FIFOs, devices), by their archive name.
 */
export async function settleAgentFolders(
  host: HostFolders,
  precopy: Precopy,
  leftOut: string[]
): Promise<string[]> {
  const { skipped, seen } = await pass(host, precopy.dest, leftOut, (name, info) =>
    unchanged(precopy.files.get(name), info, precopy.startedAt)
  )
  await prune(precopy.dest, 'files', seen)
  return skipped
}
