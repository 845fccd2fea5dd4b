import { Cron } from 'croner'
import { ValidationException } from '#core/exceptions/api_exceptions'

/**
 * Cron expressions through croner (maintained, time-zone aware, 5 fields
 * plus @hourly-style nicknames), never a hand-written parser.
 */
function pattern(cron: string, timezone: string): Cron {
  return new Cron(cron, { timezone, paused: true })
}

/** The IANA zone, or a 400 saying it is unknown. */
export function checkTimezone(timezone: string): string {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone })
    return timezone
  } catch {
    throw new ValidationException(
      `timezone: "${timezone}" is not an IANA time zone (for example "Europe/Paris" or "UTC")`
    )
  }
}

/** The cron expression, or a 400 saying what is wrong with it. */
export function checkCron(cron: string, timezone: string): string {
  if (cron.trim().split(/\s+/).length > 5 && !cron.startsWith('@')) {
    throw new ValidationException(
      'cron: use 5 fields (minute hour day month weekday) or a nickname like @hourly'
    )
  }
  try {
    if (!pattern(cron, timezone).nextRun()) throw new Error('it never fires')
  } catch (error) {
    throw new ValidationException(
      `cron: "${cron}" is not a valid cron expression (${(error as Error).message})`
    )
  }
  return cron
}

/** The first run strictly after `from`, in UTC; null when the expression never fires again. */
export function nextRunAfter(cron: string, timezone: string, from: Date): Date | null {
  return pattern(cron, timezone).nextRun(from)
}

/** Shortest gap between the next runs, in minutes (checked against the tier's minimum). */
export function shortestIntervalMinutes(cron: string, timezone: string, from = new Date()): number {
  const runs = pattern(cron, timezone).nextRuns(24, from)
  let shortest = Number.POSITIVE_INFINITY
  for (let i = 1; i < runs.length; i++) {
    shortest = Math.min(shortest, (runs[i].getTime() - runs[i - 1].getTime()) / 60_000)
  }
  return shortest
}

/** How many runs fell between `from` (exclusive of the one that runs now) and `until`. */
export function missedRuns(cron: string, timezone: string, due: Date, until: Date): number {
  const job = pattern(cron, timezone)
  let missed = 0
  let cursor: Date | null = due
  while (missed < 10_000) {
    cursor = job.nextRun(cursor!)
    if (!cursor || cursor > until) break
    missed++
  }
  return missed
}
