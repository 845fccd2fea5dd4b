import { randomBytes } from 'node:crypto'
import { chmod, mkdir, readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import app from '@adonisjs/core/services/app'
import { agentsDir, storageDir } from '#core/bootstrap/paths'

/**
 * Where archives live: `<STORAGE_DIR>/backups/` (0700, the service's),
 * never in an agent's own folders, which the agent can change:
 *
 *   backups/<agent id>/<backup id>.tar.gz   stored archives (0600)
 *   backups/.work/<random>/                 uploads and unpacked archives while they are checked
 */
export function backupsRoot(): string {
  return join(storageDir(app.appRoot), 'backups')
}

/** The agents folder the runtime uses (process driver). */
export function agentsFolder(): string {
  return agentsDir(app.appRoot)
}

async function ensurePrivateFolder(path: string): Promise<string> {
  await mkdir(path, { recursive: true, mode: 0o700 })
  // mkdir's mode is masked by the umask and leaves an existing folder as it was.
  await chmod(path, 0o700)
  return path
}

export async function agentBackupFolder(agentId: string): Promise<string> {
  await ensurePrivateFolder(backupsRoot())
  return ensurePrivateFolder(join(backupsRoot(), agentId))
}

export function archivePath(agentId: string, backupId: string): string {
  return join(backupsRoot(), agentId, `${backupId}.tar.gz`)
}

/**
 * A fresh private work folder (an upload, an unpacked archive) passed to
 * `work`, removed afterwards whatever happened: a refused archive leaves
 * nothing behind.
 */
export async function withWorkFolder<T>(work: (folder: string) => Promise<T>): Promise<T> {
  await ensurePrivateFolder(backupsRoot())
  const base = await ensurePrivateFolder(join(backupsRoot(), '.work'))
  const folder = join(base, randomBytes(12).toString('hex'))
  await mkdir(folder, { mode: 0o700 })
  try {
    return await work(folder)
  } finally {
    await rm(folder, { recursive: true, force: true })
  }
}

/** Agent folders of the backups root (agents that have or had archives). */
export async function agentFoldersWithArchives(): Promise<string[]> {
  const entries = await readdir(backupsRoot(), { withFileTypes: true }).catch(() => [])
  return entries
    .filter((entry) => entry.isDirectory() && !entry.name.startsWith('.'))
    .map((entry) => entry.name)
}

export async function removeAgentArchives(agentId: string): Promise<void> {
  await rm(join(backupsRoot(), agentId), { recursive: true, force: true })
}
