import limiter from '@adonisjs/limiter/services/main'
import { type TierKey, tierPlan } from '#config/plans'

/** Who the quota belongs to: the account and the tier it enjoys now. */
export interface QuotaSubject {
  id: string
  effectiveTier: TierKey
}

export interface QuotaResult {
  /** False once today's count is past the limit: answer 429. */
  allowed: boolean
  limit: number
  /** Requests let through today (at most `limit`). */
  used: number
  remaining: number
  /** Next 00:00 UTC, when the count starts again. */
  resetAt: Date
}

/** Largest block of request numbers one instance reserves at once. */
const MAX_LEASE = 100
/** A lease used up faster than this is followed by a bigger one. */
const FAST_REFILL_MS = 1000

/**
 * Request numbers this instance reserved in the shared counter for one
 * account and day: `next`..`end` are still free to hand out.
 */
interface Lease {
  day: string
  next: number
  end: number
  /** The shared count after this instance's last reservation. */
  storeCount: number
  size: number
  reservedAt: number
  pending?: Promise<void>
}

function utcDay(now: Date): string {
  return now.toISOString().slice(0, 10)
}

export function nextUtcMidnight(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1))
}

type Store = ReturnType<typeof limiter.use>

/** One limiter per daily limit: `limiter.use` parses its options on every call. */
const stores = new Map<number, Store>()

/** The current UTC day, computed once per day rather than per request. */
let currentDay: { start: number; end: number; day: string } | undefined

function dayOf(now: Date) {
  const at = now.getTime()
  if (!currentDay || at < currentDay.start || at >= currentDay.end) {
    const end = nextUtcMidnight(now).getTime()
    currentDay = { start: end - 86_400_000, end, day: utcDay(now) }
  }
  return currentDay.day
}

/**
 * One counter per account per UTC day (all its API keys together) in the
 * limiter store (Redis with REDIS_URL, else PostgreSQL). The key carries
 * the date, so a new day starts at zero.
 */
function counter(subject: QuotaSubject, now: Date) {
  const limit = tierPlan(subject.effectiveTier).dailyRequestLimit
  const day = dayOf(now)
  let store = stores.get(limit)
  if (!store) {
    store = limiter.use({ requests: limit, duration: '1 day' })
    stores.set(limit, store)
  }
  return { limit, day, key: `api:${subject.id}:${day}`, store }
}

function result(limit: number, counted: number, now: Date): QuotaResult {
  return {
    allowed: counted <= limit,
    limit,
    used: Math.min(counted, limit),
    remaining: Math.max(0, limit - counted),
    resetAt: nextUtcMidnight(now),
  }
}

/**
 * Daily /api/v1 quotas. One instance per process (`quotaService`); tests
 * make more to play several server instances sharing one store.
 */
export class QuotaCounter {
  #leases = new Map<string, Lease>()

  /**
   * Counts one /api/v1 request (or one WebSocket chat message) against the
   * daily limit of the account's tier (config/plans.ts).
   */
  async consume(subject: QuotaSubject, now: Date = new Date()): Promise<QuotaResult> {
    const { limit, day, key, store } = counter(subject, now)
    return result(limit, await this.#requestNumber(key, day, limit, store), now)
  }

  /** Today's count without counting anything. */
  async peek(subject: QuotaSubject, now: Date = new Date()): Promise<QuotaResult> {
    const { limit, key, store } = counter(subject, now)
    const response = await store.get(key)
    const lease = this.#leases.get(key)
    const unusedHere = lease ? Math.max(0, lease.end - lease.next + 1) : 0
    return result(limit, Math.max(0, (response?.consumed ?? 0) - unusedHere), now)
  }

  #forgetOtherDays(today: string) {
    if (this.#leases.size < 10_000) return
    for (const [key, lease] of this.#leases) if (lease.day !== today) this.#leases.delete(key)
  }

  /**
   * The number of this request in today's count for the account (1-based).
   *
   * Numbers come from atomic increments of the shared counter, so no two
   * requests anywhere get the same number and no more than `limit` numbers
   * within the limit exist: the limit is never exceeded, on any number of
   * instances. Under a burst an instance reserves a block of numbers in one
   * increment (doubling while blocks run out within a second, at most 100 and
   * at most 1/16 of what is left) and hands them out without a round trip;
   * at a normal pace it reserves one at a time, so the shared count stays
   * exact. On one instance the outcome is exact either way (150 concurrent
   * requests with 100 left: exactly 100 pass). With several, numbers another
   * instance reserved but has not used yet count as used until it does.
   */
  async #requestNumber(
    key: string,
    day: string,
    limit: number,
    store: ReturnType<typeof counter>['store']
  ) {
    let lease = this.#leases.get(key)
    if (!lease) {
      this.#forgetOtherDays(day)
      lease = { day, next: 1, end: 0, storeCount: 0, size: 1, reservedAt: 0 }
      this.#leases.set(key, lease)
    }

    while (true) {
      if (lease.next <= lease.end) return lease.next++
      // Known to be used up (and the limit has not been raised since).
      if (lease.end > 0 && lease.storeCount >= limit) return lease.storeCount + 1
      if (lease.pending) {
        await lease.pending
        continue
      }

      const current = lease
      const fast = Date.now() - current.reservedAt < FAST_REFILL_MS
      const cap = Math.max(1, Math.min(MAX_LEASE, Math.floor((limit - current.storeCount) / 16)))
      const size = fast ? Math.min(cap, current.size * 2) : 1
      current.pending = store
        .increment(key, size)
        .then((response) => {
          current.next = response.consumed - size + 1
          current.end = response.consumed
          current.storeCount = response.consumed
          current.size = size
          current.reservedAt = Date.now()
        })
        .finally(() => {
          current.pending = undefined
        })
      await current.pending
    }
  }
}

const quotaService = new QuotaCounter()

/** Counts one request for the account; see QuotaCounter.consume. */
export const consume = (subject: QuotaSubject, now?: Date) => quotaService.consume(subject, now)
/** Today's count; see QuotaCounter.peek. */
export const peek = (subject: QuotaSubject, now?: Date) => quotaService.peek(subject, now)

export default quotaService
