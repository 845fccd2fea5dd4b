import { createHash } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import logger from '@adonisjs/core/services/logger'
import { INSTANCE_ID, holderIsGone } from '#core/jobs/instance'

/** Re-exported: callers that lease through this module name their holder with it. */
export { INSTANCE_ID }

/**
 * Periodic background jobs (lapse of subscriptions, monthly grants, history
 * pruning, ...). Every instance runs the timers; each run first claims the
 * job's lease in `periodic_job_leases` (one short statement: free, expired,
 * or already this instance's), renews it while it runs and frees it at the
 * end, so when several instances share one database a given job runs on
 * one of them at a time and the others skip that tick. A run holds no
 * database connection of its own: jobs that outnumber the pool cannot
 * starve each other (which a transaction-scoped advisory lock per run did).
 * A holder that dies leaves its lease to expire (LEASE_MS), or to be taken
 * over at once when it provably died (holderIsGone: same host, pid gone),
 * so a service killed mid-run does not hold up its successor's first run.
 * Jobs must still be idempotent: a tick may run late or twice.
 */
export interface PeriodicJob {
  /** Unique name, also the lease key. */
  name: string
  /** Interval between runs. */
  everyMs: number
  /** Runs once shortly after start as well, when true (default). */
  runOnStart?: boolean
  run(): Promise<void>
}

const jobs = new Map<string, PeriodicJob>()
const timers = new Map<string, NodeJS.Timeout>()
/** Jobs running in this process now: a tick never overlaps its own job's previous run. */
const running = new Set<string>()
let started = false

/** How long a claim lasts without renewal; renewed every third of it while the job runs. */
export const LEASE_MS = 60_000

/** Stable 63-bit key for a job name (kept for callers that lock by key). */
export function lockKeyFor(name: string): string {
  return BigInt.asIntN(
    64,
    createHash('sha256').update(`job:${name}`).digest().readBigInt64BE()
  ).toString()
}

/**
 * Claims the job's lease for `holder`; true when it is now theirs. A lease
 * whose holder provably died is taken over (only looked up when the claim
 * finds the lease taken, which is rare).
 */
export async function claimJobLease(name: string, holder: string, ms = LEASE_MS) {
  if (await claimFreeJobLease(name, holder, ms)) return true
  const current = await db.from('periodic_job_leases').where('name', name).select('holder').first()
  if (!current || !holderIsGone(current.holder)) return false
  const takenOver = await db.rawQuery(
    `update periodic_job_leases
        set holder = ?, started_at = now(), expires_at = now() + (? * interval '1 millisecond')
      where name = ? and holder = ?
      returning name`,
    [holder, ms, name, current.holder]
  )
  return takenOver.rows.length > 0
}

async function claimFreeJobLease(name: string, holder: string, ms: number) {
  const result = await db.rawQuery(
    `insert into periodic_job_leases (name, holder, started_at, expires_at)
     values (?, ?, now(), now() + (? * interval '1 millisecond'))
     on conflict (name) do update
       set holder = excluded.holder, started_at = excluded.started_at, expires_at = excluded.expires_at
       where periodic_job_leases.expires_at <= now() or periodic_job_leases.holder = excluded.holder
     returning name`,
    [name, holder, ms]
  )
  return result.rows.length > 0
}

async function renewJobLease(name: string, holder: string) {
  await db.rawQuery(
    `update periodic_job_leases set expires_at = now() + (? * interval '1 millisecond')
     where name = ? and holder = ?`,
    [LEASE_MS, name, holder]
  )
}

async function releaseJobLease(name: string, holder: string) {
  await db.rawQuery(
    `update periodic_job_leases set expires_at = now() where name = ? and holder = ?`,
    [name, holder]
  )
}

/**
 * Runs the job now unless it already runs here or another instance holds
 * its lease. Returns false when the run was skipped.
 */
export async function runJobExclusively(
  job: PeriodicJob,
  holder: string = INSTANCE_ID
): Promise<boolean> {
  const key = `${holder}|${job.name}`
  if (running.has(key)) return false
  running.add(key)
  try {
    if (!(await claimJobLease(job.name, holder))) return false
    const renewal = setInterval(() => {
      renewJobLease(job.name, holder).catch((error) =>
        logger.warn({ err: error, job: job.name }, 'renewing a job lease failed')
      )
    }, LEASE_MS / 3)
    renewal.unref()
    try {
      await job.run()
    } finally {
      clearInterval(renewal)
      await releaseJobLease(job.name, holder).catch((error) =>
        logger.warn({ err: error, job: job.name }, 'releasing a job lease failed')
      )
    }
    return true
  } finally {
    running.delete(key)
  }
}

async function tick(job: PeriodicJob) {
  try {
    await runJobExclusively(job)
  } catch (error) {
    logger.error({ err: error, job: job.name }, 'periodic job failed')
  }
}

export function registerPeriodicJob(job: PeriodicJob) {
  jobs.set(job.name, job)
  if (started) schedule(job)
}

function schedule(job: PeriodicJob) {
  if (timers.has(job.name)) return
  const timer = setInterval(() => tick(job), job.everyMs)
  timer.unref()
  timers.set(job.name, timer)
  if (job.runOnStart !== false) setTimeout(() => tick(job), 1000).unref()
}

/** Starts the timers (web server only; tests call runJobExclusively directly). */
export function startPeriodicJobs() {
  started = true
  for (const job of jobs.values()) schedule(job)
}

export function stopPeriodicJobs() {
  started = false
  for (const timer of timers.values()) clearInterval(timer)
  timers.clear()
}

export function registeredJobs(): PeriodicJob[] {
  return [...jobs.values()]
}
