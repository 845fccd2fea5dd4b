import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { writeFileAtomic } from '#core/files/atomic_file'

/** One id per service process, recorded in every lock it holds. */
export const INSTANCE_ID = randomUUID()

/** What a lock folder's `owner.json` records about its holder. */
export interface LockOwner {
  instanceId: string
  host: string
  pid: number
  /** Field 22 of /proc/<pid>/stat (clock ticks after boot): tells a reused pid apart. */
  startTime: string | null
  /** Epoch ms; the holder pushes it forward while it works. */
  expiresAt: number
}

export interface InstallLockOptions {
  /** How long a record stays valid without renewal; renewed at a third of it. */
  ttlMs?: number
  /** Longest to wait for a live holder. */
  timeoutMs?: number
  pollMs?: number
  log?: (message: string) => void
}

/** Start time of a process from /proc, or null where there is no /proc or no such process. */
export function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) may hold spaces and parentheses: count after its last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null
  } catch {
    return null
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * Why a holder no longer holds, or null while it does: on this host a gone
 * pid or a different start time proves it dead at once; elsewhere (or
 * without /proc) only the expiry can.
 */
export function staleReason(owner: LockOwner, now = Date.now()): string | null {
  if (owner.host === hostname()) {
    if (!pidAlive(owner.pid)) return `holder pid ${owner.pid} is gone`
    const startTime = processStartTime(owner.pid)
    if (owner.startTime && startTime && startTime !== owner.startTime) {
      return `holder pid ${owner.pid} was reused by another process`
    }
  }
  if (owner.expiresAt < now)
    return `holder record expired ${new Date(owner.expiresAt).toISOString()}`
  return null
}

async function readOwner(lock: string): Promise<LockOwner | null> {
  try {
    return JSON.parse(await readFile(`${lock}/owner.json`, 'utf8')) as LockOwner
  } catch {
    return null
  }
}

export interface HeldLock {
  release(): Promise<void>
}

/**
 * A cross-process lock as a folder holding its owner's record. It is
 * created whole (record written in a private folder, then renamed into
 * place), renewed while held, and taken over at once from a provably dead
 * holder, or by expiry otherwise.
 */
export async function acquireInstallLock(
  lock: string,
  label: string,
  options: InstallLockOptions = {}
): Promise<HeldLock> {
  const ttlMs = options.ttlMs ?? 2 * 60 * 1000
  const timeoutMs = options.timeoutMs ?? 15 * 60 * 1000
  const started = Date.now()
  const owner = (): LockOwner => ({
    instanceId: INSTANCE_ID,
    host: hostname(),
    pid: process.pid,
    startTime: processStartTime(process.pid),
    expiresAt: Date.now() + ttlMs,
  })
  let told = false
  while (true) {
    const draft = `${lock}.new-${process.pid}-${randomUUID()}`
    await mkdir(draft)
    await writeFile(`${draft}/owner.json`, JSON.stringify(owner()))
    try {
      // Renaming onto an existing lock fails (it is never empty), so one taker wins.
      await rename(draft, lock)
      return holdLock(lock, owner, ttlMs)
    } catch (error) {
      await rm(draft, { recursive: true, force: true })
      const code = (error as NodeJS.ErrnoException).code
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error
    }

    const holder = await readOwner(lock)
    // No readable record: a lock in the old bare-folder form, or gone meanwhile.
    const reason = holder ? staleReason(holder) : 'holder left no record'
    if (reason) {
      await breakLock(lock, holder, label, reason, options.log)
      continue
    }
    if (!told) {
      options.log?.(`${label}: waiting for install by pid ${holder!.pid} (${holder!.instanceId})`)
      told = true
    }
    if (Date.now() - started > timeoutMs) {
      throw new Error(`${label}: timed out waiting for the install lock ${lock}`)
    }
    await sleep(options.pollMs ?? 500)
  }
}

/** Moves the lock aside, and back if what moved is not the record judged stale. */
async function breakLock(
  lock: string,
  judged: LockOwner | null,
  label: string,
  reason: string,
  log?: (message: string) => void
) {
  const aside = `${lock}.broken-${process.pid}-${randomUUID()}`
  try {
    await rename(lock, aside)
  } catch {
    return
  }
  const moved = await readOwner(aside)
  if (judged && JSON.stringify(moved) !== JSON.stringify(judged)) {
    // Another waiter took it over between our read and our rename: give it back.
    await rename(aside, lock).catch(() => {})
    return
  }
  await rm(aside, { recursive: true, force: true })
  log?.(`${label}: took over the install lock, ${reason}`)
}

function holdLock(lock: string, owner: () => LockOwner, ttlMs: number): HeldLock {
  const renewal = setInterval(() => {
    // Written aside and renamed, so a reader never sees half a record.
    void writeFileAtomic(`${lock}/owner.json`, JSON.stringify(owner()), { mode: 0o644 }).catch(
      () => {}
    )
  }, ttlMs / 3)
  renewal.unref()
  return {
    async release() {
      clearInterval(renewal)
      const current = await readOwner(lock)
      if (current?.instanceId === INSTANCE_ID && current.pid === process.pid) {
        await rm(lock, { recursive: true, force: true })
      }
    },
  }
}
