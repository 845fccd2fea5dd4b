import { createHash } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import logger from '@adonisjs/core/services/logger'

/**
 * Periodic background jobs (lapse of subscriptions, monthly grants, history
 * pruning, ...). Every instance runs the timers; each run takes a PostgreSQL
 * advisory lock named after the job, so when several instances share one
 * database a given job runs on one of them at a time and the others skip
 * that tick. Jobs must still be idempotent: a tick may run late or twice.
 */
export interface PeriodicJob {
  /** Unique name, also the lock key. */
  name: string
  /** Interval between runs. */
  everyMs: number
  /** Runs once shortly after start as well, when true (default). */
  runOnStart?: boolean
  run(): Promise<void>
}

const jobs = new Map<string, PeriodicJob>()
const timers = new Map<string, NodeJS.Timeout>()
let started = false

/** Stable 63-bit advisory-lock key for a job name. */
export function lockKeyFor(name: string): string {
  return BigInt.asIntN(
    64,
    createHash('sha256').update(`job:${name}`).digest().readBigInt64BE()
  ).toString()
}

/**
 * Runs the job now if no other instance is running it. Returns false when
 * another holder had the lock (the run was skipped).
 */
export async function runJobExclusively(job: PeriodicJob): Promise<boolean> {
  return db.transaction(async (trx) => {
    const result = await trx.rawQuery('select pg_try_advisory_xact_lock(?::bigint) as locked', [
      lockKeyFor(job.name),
    ])
    if (!result.rows[0]?.locked) return false
    await job.run()
    return true
  })
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
