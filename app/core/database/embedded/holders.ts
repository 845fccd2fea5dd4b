import { randomBytes } from 'node:crypto'
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { isIdentityAlive, ownIdentity } from '#core/database/embedded/processes'

/*
 * One empty file per acquired handle, named "<pid>-<starttime>-<nonce>": the
 * server keeps running while any named process is alive. Files of dead
 * processes (crash, kill -9) simply stop counting and are swept up.
 */

export function registerHolder(holdersDir: string): string {
  mkdirSync(holdersDir, { recursive: true, mode: 0o700 })
  const file = join(holdersDir, `${ownIdentity()}-${randomBytes(4).toString('hex')}`)
  writeFileSync(file, '', { mode: 0o600 })
  return file
}

export function removeHolder(file: string): void {
  rmSync(file, { force: true })
}

/** Holder files of live processes; removes those of dead ones. */
export function liveHolders(holdersDir: string): string[] {
  let names: string[]
  try {
    names = readdirSync(holdersDir)
  } catch {
    return []
  }
  return names.filter((name) => {
    if (isIdentityAlive(name)) return true
    rmSync(join(holdersDir, name), { force: true })
    return false
  })
}
