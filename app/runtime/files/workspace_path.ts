import { lstat, realpath } from 'node:fs/promises'
import { dirname, join, relative as relativePath, sep } from 'node:path'
import { ForbiddenException, ValidationException } from '#core/exceptions/api_exceptions'

/**
 * Top-level names of a Linux root filesystem. An absolute path starting with
 * one of them names a real location outside the workspace (`/etc/passwd`,
 * `/proc/self/environ`), so it is refused instead of being quietly mapped
 * into the workspace. A workspace folder with such a name stays reachable
 * by its relative path (`etc/notes.txt`).
 */
const SYSTEM_ROOT_NAMES = new Set([
  'bin',
  'boot',
  'dev',
  'etc',
  'home',
  'lib',
  'lib32',
  'lib64',
  'libx32',
  'lost+found',
  'media',
  'mnt',
  'nix',
  'opt',
  'proc',
  'root',
  'run',
  'sbin',
  'snap',
  'srv',
  'sys',
  'tmp',
  'usr',
  'var',
])

/**
 * Percent-escapes that only an attack needs: encoded dots, slashes,
 * backslashes, NUL, an encoded `%` (double encoding) and overlong UTF-8
 * forms of `.` and `/`. Input arrives already URL-decoded once by the HTTP
 * layer, so any of these left in a path is a second layer of encoding.
 */
const ENCODED_ATTACK = /%(2e|2f|5c|00|25|c0|c1|e0%80|f0%80)/i

// eslint-disable-next-line no-control-regex -- refusing control characters is the point
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/

const MAX_PATH_LENGTH = 4096
const MAX_SEGMENT_LENGTH = 255

export interface WorkspacePathOptions {
  /**
   * Absolute locations that are the workspace itself (its host path, its
   * path inside the container). An absolute path under one of them is
   * accepted and made relative.
   */
  workspaceAliases?: string[]
  /** More absolute prefixes known to lie outside the workspace (storage, state mount). */
  outsidePrefixes?: string[]
  /**
   * A folder above the workspace that the agent cannot change (the agents
   * folder). With it, the workspace folder itself is taken as named below
   * it, never as what a link in its place points to.
   */
  trustedBase?: string
}

/** A workspace path after checking: never absolute, never `..`. */
export interface WorkspacePath {
  /** `a/b.txt`; empty for the workspace root. */
  relative: string
  /** `/a/b.txt`; `/` for the root. What answers show. */
  display: string
}

function forbidden(reason: string): never {
  throw new ForbiddenException(`Path refused: ${reason}`)
}

function underPrefix(path: string, prefix: string): string | undefined {
  const clean = prefix.replace(/\/+$/, '')
  if (!clean) return undefined
  if (path === clean) return ''
  if (path.startsWith(`${clean}/`)) return path.slice(clean.length + 1)
  return undefined
}

/**
 * The one path check both drivers use, before anything touches a disk or a
 * container. `/` and the empty path are the workspace root; a leading `/`
 * is the workspace root too (`/notes.txt` is `notes.txt`), except for
 * absolute paths naming real locations outside it (see SYSTEM_ROOT_NAMES
 * and `outsidePrefixes`), which are refused. Refused with ForbiddenException
 * (403): `..` segments (with `/` or `\`), NUL and other control
 * characters, percent-encoded dots, slashes, backslashes, NUL or `%`
 * (double encoding). Symlinks are checked by the driver against the real
 * files (resolveLocalWorkspacePath, or the container's stat for docker).
 */
export function resolveWorkspacePath(
  input: unknown,
  options: WorkspacePathOptions = {}
): WorkspacePath {
  if (input === undefined || input === null) input = '/'
  if (typeof input !== 'string') throw new ValidationException('path must be a string')
  if (input.length > MAX_PATH_LENGTH) {
    throw new ValidationException(`path is longer than ${MAX_PATH_LENGTH} characters`)
  }
  if (CONTROL_CHARACTERS.test(input)) forbidden('control characters or NUL bytes')
  if (ENCODED_ATTACK.test(input)) forbidden('percent-encoded path separators or dots')

  let rest = input.trim()
  if (rest.startsWith('/') || rest.startsWith('\\')) {
    const absolute = `/${rest.replace(/^[/\\]+/, '')}`.replace(/\/+$/, '') || '/'
    const alias = (options.workspaceAliases ?? [])
      .map((prefix) => underPrefix(absolute, prefix))
      .find((relative) => relative !== undefined)
    if (alias !== undefined) {
      rest = alias
    } else {
      if (
        (options.outsidePrefixes ?? []).some(
          (prefix) => underPrefix(absolute, prefix) !== undefined
        )
      ) {
        forbidden('absolute paths outside the workspace are not allowed')
      }
      const first = absolute.split('/')[1] ?? ''
      if (SYSTEM_ROOT_NAMES.has(first)) {
        forbidden('absolute paths outside the workspace are not allowed')
      }
      rest = absolute.slice(1)
    }
  }

  const segments: string[] = []
  for (const segment of rest.split(/[/\\]+/)) {
    if (segment === '' || segment === '.') continue
    if (segment === '..' || /^\.\.[\s.]*$/.test(segment)) forbidden('".." is not allowed')
    if (segment.length > MAX_SEGMENT_LENGTH) {
      throw new ValidationException(
        `a path segment is longer than ${MAX_SEGMENT_LENGTH} characters`
      )
    }
    segments.push(segment)
  }
  const relative = segments.join('/')
  return { relative, display: `/${relative}` }
}

function isInside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : `${root}${sep}`)
}

async function lstatOrUndefined(path: string) {
  try {
    return await lstat(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined
    throw error
  }
}

/** A checked workspace path on the local disk (process driver). */
export interface LocalWorkspacePath extends WorkspacePath {
  /** Absolute host path inside the real workspace directory, as named (symlinks kept). */
  absolute: string
  /**
   * The same with every existing symlink resolved (checked to be inside):
   * what reads and writes open, with O_NOFOLLOW against a link swapped in
   * after the check. Deleting uses `absolute`, so a link is removed, not its target.
   */
  real: string
  /** The real (symlink-free) workspace directory. */
  workspace: string
}

/**
 * resolveWorkspacePath, then the symlink check on the real files: the
 * deepest existing part of the path, with every symlink on the way
 * resolved, must still be inside the real workspace directory. A dangling
 * symlink is refused too (writing through it would create a file wherever
 * it points).
 */
export async function resolveLocalWorkspacePath(
  workspaceDir: string,
  input: unknown,
  options: WorkspacePathOptions = {}
): Promise<LocalWorkspacePath> {
  // With a trusted base, a workspace folder replaced by a link resolves
  // outside `workspace` below and is refused, instead of becoming the root.
  const workspace = options.trustedBase
    ? join(await realpath(options.trustedBase), relativePath(options.trustedBase, workspaceDir))
    : await realpath(workspaceDir)
  const checked = resolveWorkspacePath(input, {
    ...options,
    workspaceAliases: [workspaceDir, workspace, ...(options.workspaceAliases ?? [])],
  })
  const absolute = checked.relative ? join(workspace, checked.relative) : workspace

  let existing = absolute
  let stats = await lstatOrUndefined(existing)
  while (!stats && existing !== workspace) {
    existing = dirname(existing)
    stats = await lstatOrUndefined(existing)
  }
  let real: string
  try {
    real = await realpath(existing)
  } catch {
    forbidden('symbolic link pointing outside the workspace')
  }
  if (!isInside(real, workspace)) forbidden('symbolic link pointing outside the workspace')
  const missing = relativePath(existing, absolute)
  return { ...checked, absolute, real: missing ? join(real, missing) : real, workspace }
}
