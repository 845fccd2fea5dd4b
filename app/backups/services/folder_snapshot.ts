import { constants, createWriteStream, existsSync } from 'node:fs'
import { chmod, copyFile, mkdir, utimes, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { PinnedDir } from '#runtime/files/pinned_dir'
import type { HostFolders } from '#runtime/types'
import { walkAgentFolders } from '#backups/services/folder_walk'

/**
 * Raw copy of a frozen agent's folders (docs/backups.md "Consistency"):
 * while its processes are frozen, workspace, state and home are copied as
 * they are, uncompressed, into `dest` (`<dest>/workspace/...`), a private
 * folder of the service's; the agent is thawed right after, and the
 * archive is packed, hashed and compressed from this copy off the agent's
 * clock. The walk is the archive's own (folder_walk.ts): nothing the agent
 * planted is followed.
 *
 * A file is copied by the kernel (copy_file_range) from the descriptor the
 * walk opened without following a link, through its /proc/self/fd magic
 * link: that names the open file itself, never a path the agent could
 * change. Without /proc it is streamed from the same descriptor. Only a
 * service running as root freezes agents (cgroups), so permission bits
 * never keep it from reading its own copy.
 */
const BY_DESCRIPTOR = existsSync('/proc/self/fd')

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

/**
 * Copies the agent's folders, where `host` says they lie, into `dest`
 * (which must not exist yet; one folder each, as SEPARATE_FOLDERS), keeping
 * each file's permission bits and modification time, all but `leftOut`
 * (archive names). Answers the entries left out (those, and links,
 * sockets, FIFOs, devices), by their archive name.
 */
export async function snapshotAgentFolders(
  host: HostFolders,
  dest: string,
  leftOut: string[]
): Promise<string[]> {
  await mkdir(dest, { mode: 0o700 })
  const root = await PinnedDir.trusted(host.root)
  try {
    return await walkAgentFolders(
      root,
      host.folders,
      dest,
      {
        folder: async (_name, entry, mode, parent) => {
          const path = join(parent, entry)
          await mkdir(path)
          // Exactly the agent's bits (mkdir's are masked by the umask); the service runs as root.
          await chmod(path, mode)
          return path
        },
        file: async (_name, entry, handle, info, parent) => {
          const path = join(parent, entry)
          await copyOpenFile(handle, path, info.mode & 0o777)
          await chmod(path, info.mode & 0o777)
          await utimes(path, info.atime, info.mtime)
        },
      },
      new Set(leftOut)
    )
  } finally {
    await root.close()
  }
}
