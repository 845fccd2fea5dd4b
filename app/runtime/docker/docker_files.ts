import { posix } from 'node:path'
import type Docker from 'dockerode'
import {
  ForbiddenException,
  NotFoundException,
  PayloadTooLargeException,
  ValidationException,
} from '#core/exceptions/api_exceptions'
import type { AgentFileReader } from '#plugins/types'
import type { DockerRecord } from '#runtime/docker/docker_record'
import type { FileEntry, WorkspaceFiles } from '#runtime/types'
import { MAX_WORKSPACE_FILE_BYTES, workspaceFileBytes } from '#runtime/files/local_workspace'
import { createTar, parseTar, type TarEntry } from '#runtime/files/tar'
import { resolveWorkspacePath } from '#runtime/files/workspace_path'

/** Go's os.FileMode bits in the engine's path stat. */
const MODE_DIR = 2 ** 31
const MODE_SYMLINK = 2 ** 27

export interface PathStat {
  name: string
  size: number
  mode: number
  linkTarget?: string
}

function statusOf(error: unknown): number | undefined {
  return (error as { statusCode?: number } | undefined)?.statusCode
}

async function streamToBuffer(stream: NodeJS.ReadableStream, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  let total = 0
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    total += chunk.length
    if (total > limit) {
      ;(stream as unknown as { destroy?: () => void }).destroy?.()
      throw new PayloadTooLargeException(`the archive is larger than ${limit} bytes`)
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
}

/** `HEAD /containers/{id}/archive`: the path's stat, or undefined when it does not exist. */
export async function statInContainer(
  container: Docker.Container,
  path: string
): Promise<PathStat | undefined> {
  try {
    const response: any = await container.infoArchive({ path })
    const header = response?.headers?.['x-docker-container-path-stat']
    response?.resume?.()
    if (!header) return undefined
    return JSON.parse(Buffer.from(String(header), 'base64').toString('utf8')) as PathStat
  } catch (error) {
    if (statusOf(error) === 404) return undefined
    throw error
  }
}

function isDirectory(stat: PathStat): boolean {
  return (stat.mode & MODE_DIR) !== 0
}

function isInside(path: string, root: string): boolean {
  return path === root || path.startsWith(`${root}/`)
}

/**
 * Walks the path from the root down, refusing any symlink on the way whose
 * target leaves `root` (the container's own view of it).
 */
async function checkSymlinks(container: Docker.Container, root: string, relative: string) {
  let current = root
  for (const segment of relative ? relative.split('/') : []) {
    current = posix.join(current, segment)
    const stat = await statInContainer(container, current)
    if (!stat) return
    const link = stat.linkTarget || ((stat.mode & MODE_SYMLINK) !== 0 ? '?' : '')
    if (!link) continue
    const target = posix.resolve(posix.dirname(current), link)
    if (link === '?' || !isInside(target, root)) {
      throw new ForbiddenException('Path refused: symbolic link pointing outside the workspace')
    }
    current = target
  }
}

/** The file manager on a container's workspace, through the Engine API. */
export class DockerWorkspaceFiles implements WorkspaceFiles {
  constructor(
    private readonly container: Docker.Container,
    private readonly workspace: string,
    private readonly outsidePrefixes: string[],
    private readonly owner: { uid: number; gid: number }
  ) {}

  async #resolve(input: unknown) {
    const checked = resolveWorkspacePath(input, {
      workspaceAliases: [this.workspace],
      // Workspace aliases are matched first, so a state mount holding the workspace is still refused.
      outsidePrefixes: this.outsidePrefixes,
    })
    await checkSymlinks(this.container, this.workspace, checked.relative)
    return { ...checked, inContainer: posix.join(this.workspace, checked.relative) }
  }

  async list(path: string): Promise<FileEntry[]> {
    const target = await this.#resolve(path)
    const stat = await statInContainer(this.container, target.inContainer)
    if (!stat) throw new NotFoundException(`${target.display} not found`)
    if (!isDirectory(stat)) throw new ValidationException(`${target.display} is not a directory`)
    const archive = await streamToBuffer(
      await this.container.getArchive({ path: target.inContainer }),
      64 * 1024 * 1024
    )
    const entries: FileEntry[] = []
    for (const entry of parseTar(archive)) {
      const parts = entry.name.split('/')
      // The archive's top folder is the listed directory itself; keep its direct children.
      if (parts.length !== 2 || !parts[1]) continue
      entries.push({
        name: parts[1],
        type: entry.type === 'directory' ? 'directory' : 'file',
        size: entry.type === 'file' ? (entry.size ?? 0) : 0,
      })
    }
    return entries.sort((a, b) =>
      a.type === b.type ? a.name.localeCompare(b.name) : a.type === 'directory' ? -1 : 1
    )
  }

  async read(path: string): Promise<{ content: string; size: number }> {
    const target = await this.#resolve(path)
    const stat = await statInContainer(this.container, target.inContainer)
    if (!stat) throw new NotFoundException(`${target.display} not found`)
    if (isDirectory(stat)) throw new ValidationException(`${target.display} is a directory`)
    if (stat.size > MAX_WORKSPACE_FILE_BYTES) {
      throw new PayloadTooLargeException(
        `${target.display} is larger than ${MAX_WORKSPACE_FILE_BYTES} bytes`
      )
    }
    const archive = await streamToBuffer(
      await this.container.getArchive({ path: target.inContainer }),
      MAX_WORKSPACE_FILE_BYTES + 64 * 1024
    )
    const file = parseTar(archive).find((entry) => entry.type === 'file')
    const content = file?.content ?? Buffer.alloc(0)
    return { content: content.toString('utf8'), size: content.length }
  }

  async write(path: string, content: string): Promise<{ path: string; size: number }> {
    const bytes = workspaceFileBytes(content)
    const target = await this.#resolve(path)
    if (!target.relative) throw new ValidationException('path must name a file')
    const existing = await statInContainer(this.container, target.inContainer)
    if (existing && isDirectory(existing)) {
      throw new ValidationException(`${target.display} is a directory`)
    }
    // Parent folders travel in the archive: the engine needs the target folder to exist.
    const segments = target.relative.split('/')
    const entries: TarEntry[] = segments.slice(0, -1).map((_, index) => ({
      name: segments.slice(0, index + 1).join('/'),
      type: 'directory',
      ...this.owner,
    }))
    entries.push({ name: target.relative, type: 'file', content: bytes, ...this.owner })
    await this.container.putArchive(createTar(entries), { path: this.workspace })
    return { path: target.display, size: bytes.length }
  }

  async delete(path: string): Promise<{ deleted: string }> {
    const target = await this.#resolve(path)
    if (!target.relative) throw new ValidationException('the workspace root cannot be deleted')
    if (!(await statInContainer(this.container, target.inContainer))) {
      throw new NotFoundException(`${target.display} not found`)
    }
    await removeInContainer(this.container, target.inContainer)
    return { deleted: target.display }
  }
}

/**
 * The Engine API cannot delete a file, so `rm` runs in the container; images
 * with no shell tools (those built locally) have Node.js, which does it instead.
 */
const REMOVE_COMMANDS = [
  (path: string) => ['rm', '-rf', '--', path],
  (path: string) => [
    'node',
    '-e',
    'require("node:fs").rmSync(process.argv[1], { recursive: true, force: true })',
    path,
  ],
]
/** Exit codes of a command that is not there (or cannot run). */
const COMMAND_MISSING = new Set([126, 127])

async function removeInContainer(container: Docker.Container, path: string) {
  let exitCode: number | null | undefined
  for (const command of REMOVE_COMMANDS) {
    const exec = await container.exec({
      Cmd: command(path),
      AttachStdout: true,
      AttachStderr: true,
    })
    await streamToBuffer(await exec.start({ hijack: true, stdin: false }), 1024 * 1024)
    const inspected = await exec.inspect()
    exitCode = inspected.ExitCode
    if (exitCode === 0) return
    if (!COMMAND_MISSING.has(exitCode ?? 0)) break
  }
  throw new Error(`removing ${path} in the container failed (exit code ${exitCode})`)
}

/** Plugins' read access to a container's state and workspace. */
export class DockerAgentReader implements AgentFileReader {
  constructor(
    private readonly container: Docker.Container,
    private readonly roots: { state: string; workspace: string }
  ) {}

  async #path(root: 'state' | 'workspace', path: string) {
    const checked = resolveWorkspacePath(path)
    await checkSymlinks(this.container, this.roots[root], checked.relative)
    return posix.join(this.roots[root], checked.relative)
  }

  async readText(root: 'state' | 'workspace', path: string): Promise<string | undefined> {
    const full = await this.#path(root, path)
    const stat = await statInContainer(this.container, full)
    if (!stat || isDirectory(stat) || stat.size > MAX_WORKSPACE_FILE_BYTES) return undefined
    const archive = await streamToBuffer(
      await this.container.getArchive({ path: full }),
      MAX_WORKSPACE_FILE_BYTES + 64 * 1024
    )
    return parseTar(archive)
      .find((entry) => entry.type === 'file')
      ?.content?.toString('utf8')
  }

  async list(
    root: 'state' | 'workspace',
    path: string
  ): Promise<Array<{ name: string; type: 'file' | 'directory' }>> {
    const full = await this.#path(root, path)
    const stat = await statInContainer(this.container, full)
    if (!stat || !isDirectory(stat)) return []
    const archive = await streamToBuffer(
      await this.container.getArchive({ path: full }),
      64 * 1024 * 1024
    )
    return parseTar(archive)
      .map((entry) => ({ parts: entry.name.split('/'), entry }))
      .filter(({ parts }) => parts.length === 2 && parts[1])
      .map(({ parts, entry }) => ({
        name: parts[1],
        type: entry.type === 'directory' ? ('directory' as const) : ('file' as const),
      }))
  }
}

/** An agent's container and its record, looked up on first use (files() and reader() stay synchronous). */
export type ContainerLoader = () => Promise<{ container: Docker.Container; record: DockerRecord }>

/** The workspace file manager of the container `load` finds (once, at first use). */
export function lazyWorkspaceFiles(load: ContainerLoader): WorkspaceFiles {
  let loaded: Promise<DockerWorkspaceFiles> | undefined
  const files = () =>
    (loaded ??= load().then(
      ({ container, record }) =>
        new DockerWorkspaceFiles(container, record.workspacePath, [record.statePath], record.owner)
    ))
  return {
    list: (path) => files().then((found) => found.list(path)),
    read: (path) => files().then((found) => found.read(path)),
    write: (path, content) => files().then((found) => found.write(path, content)),
    delete: (path) => files().then((found) => found.delete(path)),
  }
}

/** What the plugin reads of the container `load` finds (once, at first use). */
export function lazyAgentReader(load: ContainerLoader): AgentFileReader {
  let loaded: Promise<DockerAgentReader> | undefined
  const reader = () =>
    (loaded ??= load().then(
      ({ container, record }) =>
        new DockerAgentReader(container, {
          state: record.statePath,
          workspace: record.workspacePath,
        })
    ))
  return {
    readText: (root, path) => reader().then((found) => found.readText(root, path)),
    list: (root, path) => reader().then((found) => found.list(root, path)),
  }
}
