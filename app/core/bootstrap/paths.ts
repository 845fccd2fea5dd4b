import { basename, dirname, join, resolve } from 'node:path'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/**
 * The project root: the folder holding package.json and storage/. A built
 * server runs from build/, whose parent is the project root.
 */
export function projectRoot(appRoot: URL | string): string {
  const dir = typeof appRoot === 'string' ? resolve(appRoot) : fileURLToPath(appRoot)
  const parent = dirname(dir.replace(/\/+$/, ''))
  if (basename(dir.replace(/\/+$/, '')) === 'build' && existsSync(join(parent, 'package.json'))) {
    return parent
  }
  return dir.replace(/\/+$/, '')
}

/** Where the service keeps its local state (embedded database, keys, mail, agents). */
export function storageDir(appRoot: URL | string): string {
  return process.env.STORAGE_DIR
    ? resolve(process.env.STORAGE_DIR)
    : join(projectRoot(appRoot), 'storage')
}
