import { ValidationException } from '#core/exceptions/api_exceptions'

/**
 * The agent archive (docs/backups.md "Format"): a gzip-compressed tar of
 *
 *   agent.json                    name, description, avatar, framework, config, skills
 *   data/schedules.json           scheduled tasks
 *   data/knowledge.json           knowledge files (their text)
 *   data/chat_messages.json       stored conversation
 *   files/workspace/...           the agent's folders, as the framework left them
 *   files/state/...
 *   files/home/...
 *   manifest.json                 last: what it holds, with the SHA-256 of every file
 *
 * The manifest comes last because it names the hash of every file before
 * it, computed while they are written (one read of the agent's folders).
 */
export const ARCHIVE_FORMAT = 'agent-host-backup'
export const FORMAT_VERSION = 1
export const MANIFEST_NAME = 'manifest.json'
export const AGENT_DOCUMENT = 'agent.json'

/** The agent's folders an archive carries (tmp and cache are not kept). */
export const ARCHIVED_FOLDERS = ['workspace', 'state', 'home'] as const
export type ArchivedFolder = (typeof ARCHIVED_FOLDERS)[number]

/** The database rows an archive carries, by document name. */
export const DATA_DOCUMENTS = {
  schedules: 'data/schedules.json',
  knowledge: 'data/knowledge.json',
  chatMessages: 'data/chat_messages.json',
} as const

/** Longest JSON document (agent, data, manifest) read back from an archive. */
export const MAX_DOCUMENT_BYTES = 64 * 1024 * 1024

export interface ArchivedFile {
  size: number
  sha256: string
}

export interface Manifest {
  format: typeof ARCHIVE_FORMAT
  formatVersion: number
  createdAt: string
  framework: { name: string; version: string }
  agent: { id: string; name: string }
  /** `omitted`: secret config values left out; `encrypted`: kept, readable by this install only. */
  secrets: 'omitted' | 'encrypted'
  /** The install whose key encrypted the secrets (a digest of it, never the key). */
  install: string | null
  /** What the archive holds, in words (config, workspace, state, ...). */
  contents: string[]
  /** Entries of the agent's folders left out: links, sockets, devices (never followed). */
  skipped: string[]
  files: Record<string, ArchivedFile>
}

export interface AgentDocument {
  name: string
  description: string | null
  avatarUrl: string | null
  framework: string
  /** Secret values as stored (encrypted) or left out, per the manifest's `secrets`. */
  config: Record<string, unknown>
  installedSkills: string[]
}

export interface ScheduleDocument {
  name: string
  cron: string
  timezone: string
  message: string
  enabled: boolean
}

export interface KnowledgeDocument {
  filename: string
  content: string
}

export interface ChatMessageDocument {
  role: 'user' | 'assistant'
  content: string
  createdAt: string
}

function refuse(reason: string): never {
  throw new ValidationException(`The archive was refused: ${reason}`)
}

/**
 * Checks one entry name of an uploaded archive: relative, no `.`/`..`
 * segments, no backslashes or control characters, and one of the names
 * the format has. Answers the name without a trailing slash.
 */
export function checkEntryName(raw: string, type: 'file' | 'directory'): string {
  const name = type === 'directory' ? raw.replace(/\/+$/, '') : raw
  if (!name) refuse('an entry has no name')
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(name))
    refuse(`an entry name holds a control character or a backslash`)
  if (name.startsWith('/')) refuse(`an entry has an absolute path (${name.slice(0, 200)})`)
  const segments = name.split('/')
  if (segments.some((segment) => segment === '..')) {
    refuse(`an entry leaves the archive with ".." (${name.slice(0, 200)})`)
  }
  if (segments.some((segment) => segment === '' || segment === '.')) {
    refuse(`an entry has an empty or "." path segment (${name.slice(0, 200)})`)
  }
  if (segments.some((segment) => Buffer.byteLength(segment) > 255)) {
    refuse('an entry name has a segment longer than 255 bytes')
  }
  const [top, second] = segments
  const known =
    (type === 'file' &&
      segments.length === 1 &&
      (name === MANIFEST_NAME || name === AGENT_DOCUMENT)) ||
    (top === 'data' &&
      (type === 'directory'
        ? segments.length === 1
        : (Object.values(DATA_DOCUMENTS) as string[]).includes(name))) ||
    (top === 'files' &&
      (segments.length === 1 || (ARCHIVED_FOLDERS as readonly string[]).includes(second)))
  if (!known) refuse(`an entry is not part of the format (${name.slice(0, 200)})`)
  return name
}

/** Checks a parsed manifest's shape and version; answers it typed. */
export function checkManifest(value: unknown): Manifest {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    refuse('manifest.json is not a JSON object')
  }
  const manifest = value as Partial<Manifest>
  if (manifest.format !== ARCHIVE_FORMAT) refuse('manifest.json is not an agent archive manifest')
  if (manifest.formatVersion !== FORMAT_VERSION) {
    refuse(
      `format version ${String(manifest.formatVersion)} is not known here (this service reads version ${FORMAT_VERSION})`
    )
  }
  const framework = manifest.framework
  if (typeof framework?.name !== 'string' || typeof framework?.version !== 'string') {
    refuse('manifest.json does not name the framework and its version')
  }
  if (manifest.secrets !== 'omitted' && manifest.secrets !== 'encrypted') {
    refuse('manifest.json does not say how secrets are kept')
  }
  const files = manifest.files
  if (typeof files !== 'object' || files === null || Array.isArray(files)) {
    refuse('manifest.json lists no files')
  }
  for (const [name, file] of Object.entries(files)) {
    if (
      typeof file !== 'object' ||
      file === null ||
      !Number.isSafeInteger(file.size) ||
      typeof file.sha256 !== 'string' ||
      !/^[0-9a-f]{64}$/.test(file.sha256)
    ) {
      refuse(`manifest.json has no size and SHA-256 for ${name.slice(0, 200)}`)
    }
  }
  if (!files[AGENT_DOCUMENT]) refuse('the archive holds no agent.json')
  return manifest as Manifest
}

/**
 * Orders dotted version numbers (`2026.9.6`, `0.19.0`): negative when `a`
 * is older than `b`. Non-numeric parts compare as text.
 */
export function compareVersions(a: string, b: string): number {
  const left = a.split(/[.+-]/)
  const right = b.split(/[.+-]/)
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    const x = left[i] ?? '0'
    const y = right[i] ?? '0'
    const numeric = /^\d+$/.test(x) && /^\d+$/.test(y)
    const order = numeric ? Number(x) - Number(y) : x.localeCompare(y)
    if (order !== 0) return order
  }
  return 0
}

export { refuse as refuseArchive }
