import { randomBytes } from 'node:crypto'
import { linkSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { isIdentityAlive, ownIdentity, sleep } from '#core/database/embedded/processes'

/** Locks this process holds right now; another caller in the same process must wait too. */
const heldLocks = new Set<string>()

/** A just-created lock file may be read before its owner wrote into it. */
const EMPTY_LOCK_GRACE_MS = 5_000

/**
 * Runs fn while holding an exclusive-create lock file. A lock whose owner
 * process is gone (crash, kill -9) is broken so that nobody waits forever.
 */
export async function withFileLock<T>(
  lockPath: string,
  timeoutMs: number,
  fn: () => Promise<T>
): Promise<T> {
  await acquire(lockPath, timeoutMs)
  try {
    return await fn()
  } finally {
    release(lockPath)
  }
}

async function acquire(lockPath: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!tryCreate(lockPath)) {
    const owner = readOwner(lockPath)
    if (owner !== undefined && isStale(lockPath, owner)) {
      breakStaleLock(lockPath, owner)
      continue
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs / 1000} s waiting for ${lockPath} (held by ${owner || 'unknown'}); ` +
          'delete it if no process is starting or stopping the embedded PostgreSQL'
      )
    }
    await sleep(50)
  }
}

function tryCreate(lockPath: string): boolean {
  try {
    writeFileSync(lockPath, ownIdentity(), { flag: 'wx', mode: 0o600 })
    heldLocks.add(lockPath)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw error
  }
}

/** Owner identity written in the lock; undefined when the lock vanished meanwhile. */
function readOwner(lockPath: string): string | undefined {
  try {
    return readFileSync(lockPath, 'utf8').trim()
  } catch {
    return undefined
  }
}

function isStale(lockPath: string, owner: string): boolean {
  if (owner === '') {
    // Owner is between creating and writing the file, unless it died right there.
    try {
      return Date.now() - statSync(lockPath).mtimeMs > EMPTY_LOCK_GRACE_MS
    } catch {
      return false
    }
  }
  if (owner === ownIdentity()) return !heldLocks.has(lockPath)
  return !isIdentityAlive(owner)
}

/**
 * Moves the stale lock aside atomically, so two processes breaking it at once
 * cannot delete a lock a third one just took; puts it back if it changed hands.
 */
function breakStaleLock(lockPath: string, staleOwner: string): void {
  const aside = `${lockPath}.stale-${process.pid}-${randomBytes(4).toString('hex')}`
  try {
    renameSync(lockPath, aside)
  } catch {
    return
  }
  if (readOwner(aside) !== staleOwner) {
    try {
      linkSync(aside, lockPath)
    } catch {}
  }
  unlinkSync(aside)
}

function release(lockPath: string): void {
  heldLocks.delete(lockPath)
  if (readOwner(lockPath) !== ownIdentity()) return
  try {
    unlinkSync(lockPath)
  } catch {}
}
