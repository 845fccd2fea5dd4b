import { closeSync, constants, openSync, writeSync } from 'node:fs'
import { lstat, open } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code
}

/**
 * The log lives in the service's folder of the agent, which no agent can
 * change; still, no open here follows a link (docs/security.md "Agent folders").
 */
const APPEND = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW

/** Size of the regular file at `path`; undefined when missing (or not a regular file). */
async function sizeOf(path: string): Promise<number | undefined> {
  try {
    const info = await lstat(path)
    return info.isFile() ? info.size : undefined
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined
    throw error
  }
}

async function readRange(path: string, start: number, end: number): Promise<Buffer> {
  if (end <= start) return Buffer.alloc(0)
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  try {
    const buffer = Buffer.alloc(end - start)
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, start)
    return buffer.subarray(0, bytesRead)
  } finally {
    await handle.close()
  }
}

/**
 * An agent's captured output: one file the child writes to directly (its
 * stdout and stderr are this file, opened in append mode, so the process
 * keeps logging when the service restarts), capped by copy-and-truncate:
 * when it grows past `maxBytes`, its last `maxBytes` move to `<file>.1` and
 * it is truncated in place. At most about 2 x maxBytes stay on disk.
 */
export class LogFile {
  readonly rotatedPath: string

  constructor(
    readonly path: string,
    readonly maxBytes = 5 * 1024 * 1024
  ) {
    this.rotatedPath = `${path}.1`
  }

  /** A file descriptor in append mode for the child's stdout and stderr. */
  openForChild(): number {
    return openSync(this.path, APPEND, 0o600)
  }

  /** A line of the supervisor's own, marked as such. */
  note(message: string): void {
    const fd = openSync(this.path, APPEND, 0o600)
    try {
      writeSync(fd, `[runtime ${new Date().toISOString()}] ${message}\n`)
    } finally {
      closeSync(fd)
    }
  }

  /** Applies the size cap; returns true when it rotated. */
  async rotateIfNeeded(): Promise<boolean> {
    const size = await sizeOf(this.path)
    if (size === undefined || size <= this.maxBytes) return false
    const kept = await readRange(this.path, Math.max(0, size - this.maxBytes), size)
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW
    const rotated = await open(this.rotatedPath, flags, 0o600)
    try {
      await rotated.writeFile(kept)
    } finally {
      await rotated.close()
    }
    const current = await open(this.path, constants.O_WRONLY | constants.O_NOFOLLOW)
    try {
      await current.truncate(0)
    } finally {
      await current.close()
    }
    return true
  }

  /** The last `count` lines, from the rotated file too when the current one is short. */
  async tail(count: number): Promise<string[]> {
    if (count <= 0) return []
    const lines: string[] = []
    for (const file of [this.path, this.rotatedPath]) {
      const size = await sizeOf(file)
      if (!size) continue
      const bytes = await readRange(file, Math.max(0, size - this.maxBytes), size)
      const text = bytes.toString('utf8')
      const fileLines = text.split('\n')
      if (fileLines.at(-1) === '') fileLines.pop()
      lines.unshift(...fileLines.slice(-(count - lines.length)))
      if (lines.length >= count) break
    }
    return lines.slice(-count)
  }

  /**
   * Lines as they are written, after the last `tail` lines, until the signal
   * aborts. Polls the file (watchers miss writes from other processes on
   * some filesystems) and starts over when a rotation truncated it.
   */
  async *follow(options: { tail?: number; signal?: AbortSignal; intervalMs?: number } = {}) {
    const { signal } = options
    const intervalMs = options.intervalMs ?? 200
    for (const line of await this.tail(options.tail ?? 0)) yield line

    let offset = (await sizeOf(this.path)) ?? 0
    let partial = ''
    while (!signal?.aborted) {
      const size = await sizeOf(this.path)
      if (size !== undefined && size < offset) {
        offset = 0
        partial = ''
      }
      if (size !== undefined && size > offset) {
        const chunk = await readRange(this.path, offset, size)
        offset += chunk.length
        const text = partial + chunk.toString('utf8')
        const lines = text.split('\n')
        partial = lines.pop() ?? ''
        for (const line of lines) {
          if (signal?.aborted) return
          yield line
        }
        continue
      }
      try {
        await sleep(intervalMs, undefined, { signal })
      } catch {
        return
      }
    }
  }
}
