import { lstat, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { PayloadTooLargeException, ValidationException } from '#core/exceptions/api_exceptions'
import { agentPaths } from '#runtime/agent_paths'
import type { WorkspaceFiles } from '#runtime/types'

/**
 * The workspace quota (AGENT_WORKSPACE_QUOTA_MB): how much an agent's
 * workspace folder may hold. Measured by walking the host folder (files by
 * size, links not followed), stopping as soon as the quota is passed, so a
 * check costs at most one walk of an allowed workspace. Enforced twice:
 * the file manager refuses a write that would pass it, and an agent whose
 * own writes passed it is put to sleep and not woken until its owner has
 * deleted enough (docs/security.md). A workspace that is not a host folder
 * (the docker and swarm drivers keep it in the agent's volume) measures 0
 * and is not enforced here.
 */
export async function workspaceBytes(dir: string, stopAbove = Infinity): Promise<number> {
  let total = 0
  const pending = [dir]
  while (pending.length > 0 && total <= stopAbove) {
    const folder = pending.pop()!
    let entries
    try {
      entries = await readdir(folder, { withFileTypes: true })
    } catch {
      continue // gone meanwhile, or not a folder we may read
    }
    for (const entry of entries) {
      const path = join(folder, entry.name)
      if (entry.isDirectory()) {
        pending.push(path)
        continue
      }
      const info = await lstat(path).catch(() => undefined)
      if (info) total += info.size
      if (total > stopAbove) break
    }
  }
  return total
}

const MB = 1024 * 1024

function megabytes(bytes: number): string {
  return `${Math.round((bytes / MB) * 10) / 10} MB`
}

/** True when the folder holds more than `quotaBytes`. */
export async function overQuota(dir: string, quotaBytes: number): Promise<boolean> {
  return (await workspaceBytes(dir, quotaBytes)) > quotaBytes
}

/** Refuses (400) to start an agent whose workspace is over its quota. */
export async function assertStartable(dir: string, quotaBytes: number): Promise<void> {
  if (await overQuota(dir, quotaBytes)) {
    throw new ValidationException(
      `The agent's workspace is over its quota of ${megabytes(quotaBytes)}: ` +
        'delete files through the file manager, then start it again'
    )
  }
}

/** The file manager with writes checked against the quota first (413 beyond it). */
export function withWorkspaceQuota(
  files: WorkspaceFiles,
  dir: string,
  quotaBytes: number
): WorkspaceFiles {
  return {
    list: (path) => files.list(path),
    read: (path) => files.read(path),
    delete: (path) => files.delete(path),
    write: async (path, content) => {
      const incoming = typeof content === 'string' ? Buffer.byteLength(content, 'utf8') : 0
      const used = await workspaceBytes(dir, quotaBytes)
      // A file being replaced still counts: the check stays one walk, and
      // errs on the side of refusing by at most that file's size.
      if (used + incoming > quotaBytes) {
        throw new PayloadTooLargeException(
          `The workspace quota of ${megabytes(quotaBytes)} would be exceeded ` +
            `(${megabytes(Math.min(used, quotaBytes))}${used > quotaBytes ? '+' : ''} used, ` +
            `${megabytes(incoming)} more): delete files first`
        )
      }
      return files.write(path, content)
    },
  }
}

/**
 * The workspace quota of each agent's host folder, as the runtime service
 * applies it; `quotaMb` is read at each use, so a change applies at once
 * (unset or 0: unlimited).
 */
export class WorkspaceQuota {
  constructor(
    private readonly agentsDir: string,
    private readonly quotaMb: () => number | undefined
  ) {}

  #workspaceDir(agentId: string): string {
    return agentPaths(this.agentsDir, agentId).workspace
  }

  get #quotaBytes(): number | undefined {
    const mb = this.quotaMb()
    return mb ? mb * 1024 * 1024 : undefined
  }

  /** The file manager, refusing a write that would pass the quota. */
  wrap(agentId: string, files: WorkspaceFiles): WorkspaceFiles {
    const quota = this.#quotaBytes
    return quota ? withWorkspaceQuota(files, this.#workspaceDir(agentId), quota) : files
  }

  /** True when the agent's own writes took its workspace past the quota. */
  async overQuota(agentId: string): Promise<boolean> {
    const quota = this.#quotaBytes
    return quota ? overQuota(this.#workspaceDir(agentId), quota) : false
  }

  /** 400 when the agent's workspace is over its quota (it may not start until it is not). */
  async assertStartable(agentId: string): Promise<void> {
    const quota = this.#quotaBytes
    if (quota) await assertStartable(this.#workspaceDir(agentId), quota)
  }
}
