import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Returns the APP_KEY kept in storage/app_key, generating it on first use.
 * The file is created exclusively so two processes starting together agree.
 */
export function ensureAppKey(storage: string): string {
  const file = join(storage, 'app_key')
  if (!existsSync(file)) {
    mkdirSync(storage, { recursive: true })
    try {
      writeFileSync(file, randomBytes(32).toString('base64url'), { mode: 0o600, flag: 'wx' })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
  }
  return readFileSync(file, 'utf8').trim()
}
