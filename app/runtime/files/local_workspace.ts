import { constants } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { lstat, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
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

/** Largest file the file manager reads or writes in one request. */
export const MAX_WORKSPACE_FILE_BYTES = 5 * 1024 * 1024

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code
}

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
    private readonly options: WorkspacePathOptions = {}
  ) {}

  async #resolve(path: unknown) {
    try {
      return await resolveLocalWorkspacePath(this.workspaceDir, path, this.options)
    } catch (error) {
      // No workspace yet: the agent was created and has not started once.
      if (
        errorCode(error) === 'ENOENT' &&
        (error as NodeJS.ErrnoException).path === this.workspaceDir
      ) {
        throw new AgentNotRunningException(
          'The agent is starting: its workspace does not exist yet'
        )
      }
      throw error
    }
  }

  async list(path: string): Promise<FileEntry[]> {
    const target = await this.#resolve(path)
    let names
    try {
      names = await readdir(target.real, { withFileTypes: true })
    } catch (error) {
      if (errorCode(error) === 'ENOENT') throw new NotFoundException(`${target.display} not found`)
      if (errorCode(error) === 'ENOTDIR') {
        throw new ValidationException(`${target.display} is not a directory`)
      }
      throw error
    }
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
    let info
    try {
      info = await stat(target.real)
    } catch (error) {
      if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') {
        throw new NotFoundException(`${target.display} not found`)
      }
      throw error
    }
    if (info.isDirectory()) throw new ValidationException(`${target.display} is a directory`)
    if (info.size > MAX_WORKSPACE_FILE_BYTES) {
      throw new PayloadTooLargeException(
        `${target.display} is larger than ${MAX_WORKSPACE_FILE_BYTES} bytes`
      )
    }
    const handle = await openNoFollow(target.real, constants.O_RDONLY)
    try {
      const buffer = await handle.readFile()
      return { content: buffer.toString('utf8'), size: buffer.length }
    } finally {
      await handle.close()
    }
  }

  async write(path: string, content: string): Promise<{ path: string; size: number }> {
    if (typeof content !== 'string') throw new ValidationException('content must be a string')
    const bytes = Buffer.from(content, 'utf8')
    if (bytes.length > MAX_WORKSPACE_FILE_BYTES) {
      throw new PayloadTooLargeException(`content is larger than ${MAX_WORKSPACE_FILE_BYTES} bytes`)
    }
    const target = await this.#resolve(path)
    if (!target.relative) throw new ValidationException('path must name a file')
    await mkdir(dirname(target.real), { recursive: true })
    // The parents may have just been created: check the path once more before writing.
    const checked = await this.#resolve(path)
    const existing = await lstat(checked.real).catch(() => undefined)
    if (existing?.isDirectory()) throw new ValidationException(`${target.display} is a directory`)
    // Written beside the target and renamed over it: a full disk or a crash
    // mid-write never leaves a half-written file, only the old one or none.
    const staged = join(
      dirname(checked.real),
      `.${basename(checked.real)}.${randomBytes(6).toString('hex')}.partial`
    )
    let handle
    try {
      handle = await openNoFollow(
        staged,
        constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL,
        0o644
      )
    } catch (error) {
      if (errorCode(error) === 'ENOTDIR') {
        throw new ValidationException(`a parent of ${target.display} is a file`)
      }
      throw error
    }
    try {
      try {
        await handle.writeFile(bytes)
      } finally {
        await handle.close()
      }
      await rename(staged, checked.real)
    } catch (error) {
      await rm(staged, { force: true })
      throw error
    }
    return { path: target.display, size: bytes.length }
  }

  async delete(path: string): Promise<{ deleted: string }> {
    const target = await this.#resolve(path)
    if (!target.relative) throw new ValidationException('the workspace root cannot be deleted')
    try {
      await stat(target.absolute)
    } catch (error) {
      if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') {
        throw new NotFoundException(`${target.display} not found`)
      }
      throw error
    }
    await rm(target.absolute, { recursive: true, force: true })
    return { deleted: target.display }
  }
}

/** Plugins' read access to an agent's local state and workspace folders. */
export class LocalAgentReader implements AgentFileReader {
  constructor(private readonly roots: { state: string; workspace: string }) {}

  async readText(root: 'state' | 'workspace', path: string): Promise<string | undefined> {
    const checked = await resolveLocalWorkspacePath(this.roots[root], path)
    try {
      const handle = await openNoFollow(checked.real, constants.O_RDONLY)
      try {
        const info = await handle.stat()
        if (!info.isFile() || info.size > MAX_WORKSPACE_FILE_BYTES) return undefined
        const bytes = await handle.readFile()
        return bytes.toString('utf8')
      } finally {
        await handle.close()
      }
    } catch (error) {
      if (['ENOENT', 'ENOTDIR', 'EISDIR'].includes(errorCode(error) ?? '')) return undefined
      throw error
    }
  }

  async list(
    root: 'state' | 'workspace',
    path: string
  ): Promise<Array<{ name: string; type: 'file' | 'directory' }>> {
    const checked = await resolveLocalWorkspacePath(this.roots[root], path)
    try {
      const entries = await readdir(checked.real, { withFileTypes: true })
      return entries
        .filter((entry) => entry.isFile() || entry.isDirectory())
        .map((entry) => ({
          name: entry.name,
          type: entry.isDirectory() ? ('directory' as const) : ('file' as const),
        }))
        .sort((a, b) => a.name.localeCompare(b.name))
    } catch (error) {
      if (['ENOENT', 'ENOTDIR'].includes(errorCode(error) ?? '')) return []
      throw error
    }
  }
}
