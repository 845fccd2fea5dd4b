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

/**
 * Requests of one account waiting on this instance for their numbers: they
 * are counted together in the next increment of the shared counter.
 */
interface Batch {
  size: number
  /** Resolves with the shared count after the batch's increment. */
  counted: Promise<number>
}

interface KeyQueue {
  day: string
  /** The increment on its way to the store, if any. */
  inFlight?: Promise<unknown>
  /** Requests that arrived meanwhile: counted by the next increment. */
  next?: Batch & { start(): void }
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
  #queues = new Map<string, KeyQueue>()

  /**
   * Counts one /api/v1 request (or one WebSocket chat message) against the
   * daily limit of the account's tier (config/plans.ts).
   */
  async consume(subject: QuotaSubject, now: Date = new Date()): Promise<QuotaResult> {
    const { limit, day, key, store } = counter(subject, now)
    return result(limit, await this.#requestNumber(key, day, store), now)
  }

  /** Today's count without counting anything. */
  async peek(subject: QuotaSubject, now: Date = new Date()): Promise<QuotaResult> {
    const { limit, key, store } = counter(subject, now)
    const response = await store.get(key)
    return result(limit, response?.consumed ?? 0, now)
  }

  #forgetOtherDays(today: string) {
    if (this.#queues.size < 10_000) return
    for (const [key, queue] of this.#queues) {
      if (queue.day !== today && !queue.inFlight) this.#queues.delete(key)
    }
  }

  /**
   * The number of this request in today's count for the account (1-based).
   *
   * Numbers come from atomic increments of the shared counter, one number
   * per request, so the count is exact on any number of instances: no two
   * requests anywhere get the same number, no number is reserved and left
   * unused, and `X-RateLimit-Remaining` goes down by one per request whichever
   * instance answers. Requests that arrive on this instance while its
   * increment for the account is on its way wait for the next one and are
   * counted together (`INCRBY n`), so a burst costs one round trip per
   * round trip's worth of requests, not one per request.
   */
  async #requestNumber(key: string, day: string, store: ReturnType<typeof counter>['store']) {
    let queue = this.#queues.get(key)
    if (!queue) {
      this.#forgetOtherDays(day)
      queue = { day }
      this.#queues.set(key, queue)
    }
    const batch = (queue.next ??= this.#newBatch(key, queue, store))
    const place = batch.size++
    if (!queue.inFlight) batch.start()
    const counted = await batch.counted
    return counted - batch.size + 1 + place
  }

  #newBatch(key: string, queue: KeyQueue, store: ReturnType<typeof counter>['store']) {
    let start!: () => void
    const counted = new Promise<number>((resolve, reject) => {
      start = () => {
        queue.next = undefined
        const increment = store
          .increment(key, batch.size)
          .then((response) => resolve(response.consumed), reject)
        queue.inFlight = increment.finally(() => {
          queue.inFlight = undefined
          // Whoever arrived meanwhile goes now, in one increment.
          queue.next?.start()
        })
      }
    })
    const batch = { size: 0, counted, start: () => start() }
    return batch
  }
}

const quotaService = new QuotaCounter()

/** Counts one request for the account; see QuotaCounter.consume. */
export const consume = (subject: QuotaSubject, now?: Date) => quotaService.consume(subject, now)
/** Today's count; see QuotaCounter.peek. */
export const peek = (subject: QuotaSubject, now?: Date) => quotaService.peek(subject, now)

export default quotaService
