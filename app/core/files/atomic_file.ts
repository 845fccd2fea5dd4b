import { randomBytes } from 'node:crypto'
import { link, readFile, rename, rm, writeFile } from 'node:fs/promises'

/**
 * Files that several service instances on one host write under the same
 * STORAGE_DIR (docs/runtime.md "Many machines"): each writer stages its own
 * copy under a name no other writer uses, then publishes it in one system
 * call, so no reader ever sees half a file and no writer renames or deletes
 * another's staging copy (the issue's `ENOENT: rename ...bpf.<pid>`).
 */

/** A name beside `path` that no other writer (process or call) uses. */
export function stagingName(path: string): string {
  return `${path}.${process.pid}-${randomBytes(6).toString('hex')}.partial`
}

/**
 * Replaces `path` with `data` in one rename: a reader sees the old file or
 * the new one; of concurrent writers, the last rename wins.
 */
export async function writeFileAtomic(
  path: string,
  data: string | Buffer,
  options: { mode?: number } = {}
): Promise<void> {
  const staged = stagingName(path)
  try {
    await writeFile(staged, data, { mode: options.mode ?? 0o600 })
    await rename(staged, path)
  } finally {
    await rm(staged, { force: true })
  }
}

/**
 * Publishes `data` at `path` unless something is there already (link(2)
 * refuses an existing name, so of concurrent writers exactly one wins);
 * answers what `path` holds afterwards: this writer's data or the winner's.
 */
export async function writeFileOnce(
  path: string,
  data: string,
  options: { mode?: number } = {}
): Promise<string> {
  const staged = stagingName(path)
  try {
    await writeFile(staged, data, { mode: options.mode ?? 0o600 })
    await link(staged, path)
    return data
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    return readFile(path, 'utf8')
  } finally {
    await rm(staged, { force: true })
  }
}

/**
 * Moves a staged folder onto `path` when nothing is there yet;
 * false, with the staged copy removed, when another writer published first
 * (rename(2) refuses a non-empty folder), whose copy then stands.
 */
export async function publishOnce(staged: string, path: string): Promise<boolean> {
  try {
    await rename(staged, path)
    return true
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error
    await rm(staged, { recursive: true, force: true })
    return false
  }
}
