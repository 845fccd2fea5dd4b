import { execFile } from 'node:child_process'
import {
  chmodSync,
  existsSync,
  lchownSync,
  lstatSync,
  readdirSync,
  realpathSync,
  statSync,
} from 'node:fs'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'

const exec = promisify(execFile)

/** PostgreSQL refuses to run as root; as root we run it as this unprivileged user. */
export const POSTGRES_OS_USER = 'agenthost-pg'

export interface SystemUser {
  name: string
  uid: number
  gid: number
}

let cachedUser: SystemUser | undefined

async function lookupUser(name: string): Promise<SystemUser | undefined> {
  try {
    const uid = await exec('id', ['-u', name])
    const gid = await exec('id', ['-g', name])
    return { name, uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) }
  } catch {
    return undefined
  }
}

async function groupExists(name: string): Promise<boolean> {
  try {
    await exec('getent', ['group', name])
    return true
  } catch {
    return false
  }
}

function noLoginShell(): string {
  return ['/usr/sbin/nologin', '/sbin/nologin'].find((shell) => existsSync(shell)) ?? '/bin/false'
}

/** The unprivileged system user (and group) that runs PostgreSQL, created when missing. */
export async function ensureSystemUser(
  name: string,
  log: (message: string) => void
): Promise<SystemUser> {
  if (cachedUser?.name === name) return cachedUser
  let user = await lookupUser(name)
  if (!user) {
    try {
      if (!(await groupExists(name))) await exec('groupadd', ['--system', name])
      await exec('useradd', [
        ...['--system', '--gid', name, '--no-create-home'],
        ...['--home-dir', '/nonexistent', '--shell', noLoginShell(), name],
      ])
      log(`created system user ${name} to run the embedded PostgreSQL (PostgreSQL refuses root)`)
    } catch (error) {
      // Another process may have created it at the same moment; the lookup decides.
      user = await lookupUser(name)
      if (!user) {
        throw new Error(`could not create system user ${name}: ${(error as Error).message}`)
      }
    }
    user ??= await lookupUser(name)
    if (!user) throw new Error(`system user ${name} was created but cannot be looked up`)
  }
  cachedUser = user
  return user
}

/** dir and every ancestor up to /, resolved through symlinks. */
function selfAndAncestors(dir: string): string[] {
  const chain: string[] = []
  let current = realpathSync(dir)
  for (;;) {
    chain.push(current)
    const parent = dirname(current)
    if (parent === current) return chain
    current = parent
  }
}

/**
 * Gives "others" search permission (x, never read) on every listed directory
 * and their ancestors that lack it, so the PostgreSQL user can reach its data
 * and binaries wherever the project lives (e.g. a clone under /root).
 */
export function grantSearchPermission(dirs: string[], user: SystemUser, log: (m: string) => void) {
  const granted = new Set<string>()
  for (const dir of dirs) {
    for (const path of selfAndAncestors(dir)) {
      const mode = statSync(path).mode
      if (mode & 0o001) continue
      chmodSync(path, (mode & 0o7777) | 0o001)
      granted.add(path)
    }
  }
  if (granted.size > 0) {
    log(`granted search permission (o+x) on ${[...granted].join(', ')} for ${user.name}`)
  }
}

/** chown -R, for a data folder created by someone else (e.g. before running as root). */
export function chownTree(path: string, user: SystemUser): void {
  lchownSync(path, user.uid, user.gid)
  if (!lstatSync(path).isDirectory()) return
  for (const entry of readdirSync(path)) chownTree(join(path, entry), user)
}
