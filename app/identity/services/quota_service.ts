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

function utcDay(now: Date): string {
  return now.toISOString().slice(0, 10)
}

export function nextUtcMidnight(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1))
}

/**
 * One counter per account per UTC day (all its API keys together). The key
 * carries the date, so a new day starts at zero; the entry outlives its day
 * by at most 24 hours.
 */
function counter(subject: QuotaSubject, now: Date) {
  const limit = tierPlan(subject.effectiveTier).dailyRequestLimit
  return {
    limit,
    key: `api:${subject.id}:${utcDay(now)}`,
    store: limiter.use({ requests: limit, duration: '1 day' }),
  }
}

function result(limit: number, consumed: number, now: Date): QuotaResult {
  return {
    allowed: consumed <= limit,
    limit,
    used: Math.min(consumed, limit),
    remaining: Math.max(0, limit - consumed),
    resetAt: nextUtcMidnight(now),
  }
}

/**
 * Counts one /api/v1 request (or one WebSocket chat message) against the
 * daily limit of the account's tier (config/plans.ts). The increment is a
 * single atomic statement in Redis or PostgreSQL, so concurrent requests
 * with N left let exactly N through.
 */
export async function consume(subject: QuotaSubject, now: Date = new Date()): Promise<QuotaResult> {
  const { limit, key, store } = counter(subject, now)
  const response = await store.increment(key, 1)
  return result(limit, response.consumed, now)
}

/** Today's count without counting anything. */
export async function peek(subject: QuotaSubject, now: Date = new Date()): Promise<QuotaResult> {
  const { limit, key, store } = counter(subject, now)
  const response = await store.get(key)
  return result(limit, response?.consumed ?? 0, now)
}

const quotaService = { consume, peek }
export default quotaService
