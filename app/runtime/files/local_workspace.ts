import { constants } from 'node:fs'
import { lstat, open, readdir, rm, stat } from 'node:fs/promises'
import { basename, dirname } from 'node:path'
import {
  AgentNotRunningException,
  ForbiddenException,
  NotFoundException,
  PayloadTooLargeException,
  ValidationException,
} from '#core/exceptions/api_exceptions'
import type { AgentFileReader } from '#plugins/types'
import type { FileEntry, WorkspaceFiles } from '#runtime/types'
import { resolveLocalWorkspacePath, type WorkspacePathOptions } from '#runtime/files/workspace_path'
import {
  inConfinedDir,
  writeFileIn,
  type ConfinedDir,
  type Owner,
} from '#runtime/files/confined_dir'
import { removeIn, type PinnedDir } from '#runtime/files/pinned_dir'

/** Largest file the file manager reads or writes in one request. */
export const MAX_WORKSPACE_FILE_BYTES = 5 * 1024 * 1024

/** A file write's content as bytes: a string within the size limit (400 / 413 otherwise). */
export function workspaceFileBytes(content: unknown): Buffer {
  if (typeof content !== 'string') throw new ValidationException('content must be a string')
  const bytes = Buffer.from(content, 'utf8')
  if (bytes.length > MAX_WORKSPACE_FILE_BYTES) {
    throw new PayloadTooLargeException(`content is larger than ${MAX_WORKSPACE_FILE_BYTES} bytes`)
  }
  return bytes
}

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code
}

/** A write's staging copy (see write()): `.<name>.<12 hex>.partial`. */
const STAGED_NAME = /^\..+\.[0-9a-f]{12}\.partial$/
/** A staging copy this old was left by a write a crash cut short (a write takes seconds at most). */
const STALE_STAGED_MS = 10 * 60_000

function sortEntries(entries: FileEntry[]): FileEntry[] {
  return entries.sort((a, b) =>
    a.type === b.type ? a.name.localeCompare(b.name) : a.type === 'directory' ? -1 : 1
  )
}

/** Opens without following a symlink in the last component (closes the check-then-open gap). */
async function openNoFollow(path: string, flags: number, mode?: number) {
  try {
    return await open(path, flags | constants.O_NOFOLLOW, mode)
  } catch (error) {
    if (errorCode(error) === 'ELOOP') {
      throw new ForbiddenException('Path refused: symbolic link pointing outside the workspace')
    }
    throw error
  }
}

/** The file manager on a workspace folder of the local disk (process driver). */
export class LocalWorkspaceFiles implements WorkspaceFiles {
  constructor(
    private readonly workspaceDir: string,
    /** `owner`: the agent's uid and gid, given to what the file manager writes. */
    private readonly options: WorkspacePathOptions & { owner?: Owner } = {}
  ) {}

  #confined(target: { display: string }, create = false) {
    return {
      display: target.display,
      create,
      trustedBase: this.options.trustedBase,
      owner: this.options.owner,
    }
  }

  async #resolve(path: unknown) {
    // No workspace yet: the agent was created and has not started once (on a new storage
    // no agent has, and the agents folder itself is missing).
    const notYet = () =>
      new AgentNotRunningException('The agent is starting: its workspace does not exist yet')
    if (!(await lstat(this.workspaceDir).catch(() => undefined))) throw notYet()
    try {
      return await resolveLocalWorkspacePath(this.workspaceDir, path, this.options)
    } catch (error) {
      // Removed meanwhile (the agent was deleted).
      if (errorCode(error) === 'ENOENT') throw notYet()
      throw error
    }
  }

  async list(path: string): Promise<FileEntry[]> {
    const target = await this.#resolve(path)
    const names = await notFoundAs(target.display, () =>
      inConfinedDir(target.workspace, target.real, this.#confined(target), async (dir) => {
        const shown = []
        for (const entry of await readdir(dir.path(), { withFileTypes: true })) {
          if (!entry.isFile() || !STAGED_NAME.test(entry.name)) shown.push(entry)
          // Never listed: a write under way, or what a kill mid-write left (removed once stale).
          else await removeIfStale(dir.path(entry.name))
        }
        return shown
      })
    )
    const entries: FileEntry[] = []
    for (const entry of names) {
      if (entry.isDirectory()) {
        entries.push({ name: entry.name, type: 'directory', size: 0 })
        continue
      }
      // Symlinks are listed by what they point to when that is inside the workspace.
      let size = 0
      let type: FileEntry['type'] = 'file'
      try {
        const resolved = await resolveLocalWorkspacePath(
          this.workspaceDir,
          `${target.relative}/${entry.name}`,
          this.options
        )
        const info = await stat(resolved.real)
        type = info.isDirectory() ? 'directory' : 'file'
        size = info.isDirectory() ? 0 : info.size
      } catch {
        // Points outside the workspace or nowhere: listed as an empty file, never followed.
      }
      entries.push({ name: entry.name, type, size })
    }
    return sortEntries(entries)
  }

  async read(path: string): Promise<{ content: string; size: number }> {
    const target = await this.#resolve(path)
    if (!target.relative) throw new ValidationException(`${target.display} is a directory`)
    const buffer = await notFoundAs(target.display, () =>
      inConfinedDir(target.workspace, dirname(target.real), this.#confined(target), async (dir) => {
        const handle = await openNoFollow(
          dir.path(basename(target.real)),
          constants.O_RDONLY | constants.O_NONBLOCK
        )
        try {
          const info = await handle.stat()
          if (info.isDirectory()) throw new ValidationException(`${target.display} is a directory`)
          if (info.size > MAX_WORKSPACE_FILE_BYTES) {
            throw new PayloadTooLargeException(
              `${target.display} is larger than ${MAX_WORKSPACE_FILE_BYTES} bytes`
            )
          }
          return await handle.readFile()
        } finally {
          await handle.close()
        }
      })
    )
    return { content: buffer.toString('utf8'), size: buffer.length }
  }

  async write(path: string, content: string): Promise<{ path: string; size: number }> {
    const bytes = workspaceFileBytes(content)
    const target = await this.#resolve(path)
    if (!target.relative) throw new ValidationException('path must name a file')
    const name = basename(target.real)
    await inConfinedDir(
      target.workspace,
      dirname(target.real),
      this.#confined(target, true),
      async (dir) => {
        const existing = await lstat(dir.path(name)).catch(() => undefined)
        if (existing?.isDirectory()) {
          throw new ValidationException(`${target.display} is a directory`)
        }
        // Written beside the target and renamed over it: a full disk or a crash
        // mid-write never leaves a half-written file, only the old one or none.
        await writeFileIn(pinnedOf(dir), name, bytes, { mode: 0o644, owner: this.options.owner })
      }
    )
    return { path: target.display, size: bytes.length }
  }

  async delete(path: string): Promise<{ deleted: string }> {
    const target = await this.#resolve(path)
    if (!target.relative) throw new ValidationException('the workspace root cannot be deleted')
    // The named entry itself goes (a link, not what it points to), from its
    // parent folder as it really is.
    const parent = await this.#resolve(dirname(target.relative))
    const name = basename(target.relative)
    await notFoundAs(target.display, () =>
      inConfinedDir(parent.workspace, parent.real, this.#confined(target), async (dir) => {
        await lstat(dir.path(name))
        await removeIn(pinnedOf(dir), name)
      })
    )
    return { deleted: target.display }
  }
}

async function removeIfStale(path: string) {
  const info = await lstat(path).catch(() => undefined)
  if (info?.isFile() && Date.now() - info.mtimeMs > STALE_STAGED_MS) {
    await rm(path, { force: true }).catch(() => {})
  }
}

/** ENOENT (the path or a parent is missing) as a 404 naming the path. */
async function notFoundAs<T>(display: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    if (errorCode(error) === 'ENOENT') throw new NotFoundException(`${display} not found`)
    throw error
  }
}

/** openConfinedDir's folders are PinnedDirs; the file manager's interface names less. */
function pinnedOf(dir: ConfinedDir): PinnedDir {
  return dir as PinnedDir
}

/** Plugins' read access to an agent's local state and workspace folders. */
export class LocalAgentReader implements AgentFileReader {
  constructor(
    private readonly roots: { state: string; workspace: string },
    /** The agents folder: the folders are walked from it, never reached through a link. */
    private readonly trustedBase?: string
  ) {}

  #resolve(root: 'state' | 'workspace', path: string) {
    return resolveLocalWorkspacePath(this.roots[root], path, { trustedBase: this.trustedBase })
  }

  async readText(root: 'state' | 'workspace', path: string): Promise<string | undefined> {
    const checked = await this.#resolve(root, path)
    if (!checked.relative) return undefined
    const options = { display: checked.display, trustedBase: this.trustedBase }
    try {
      return await inConfinedDir(checked.workspace, dirname(checked.real), options, async (dir) => {
        const handle = await openNoFollow(
          dir.path(basename(checked.real)),
          constants.O_RDONLY | constants.O_NONBLOCK
        )
        try {
          const info = await handle.stat()
          if (!info.isFile() || info.size > MAX_WORKSPACE_FILE_BYTES) return undefined
          const bytes = await handle.readFile()
          return bytes.toString('utf8')
        } finally {
          await handle.close()
        }
      })
    } catch (error) {
      if (error instanceof ValidationException) return undefined
      if (['ENOENT', 'ENOTDIR', 'EISDIR'].includes(errorCode(error) ?? '')) return undefined
      throw error
    }
  }

  async list(
    root: 'state' | 'workspace',
    path: string
  ): Promise<Array<{ name: string; type: 'file' | 'directory' }>> {
    const checked = await this.#resolve(root, path)
    const options = { display: checked.display, trustedBase: this.trustedBase }
    try {
      const entries = await inConfinedDir(checked.workspace, checked.real, options, (dir) =>
        readdir(dir.path(), { withFileTypes: true })
      )
      return entries
        .filter((entry) => entry.isFile() || entry.isDirectory())
        .map((entry) => ({
          name: entry.name,
          type: entry.isDirectory() ? ('directory' as const) : ('file' as const),
        }))
        .sort((a, b) => a.name.localeCompare(b.name))
    } catch (error) {
      if (['ENOENT', 'ENOTDIR'].includes(errorCode(error) ?? '')) return []
      if (error instanceof ValidationException) return []
      throw error
    }
  }
}
