import db from '@adonisjs/lucid/services/db'
import logger from '@adonisjs/core/services/logger'
import redis from '@adonisjs/redis/services/main'
import env from '#start/env'
import type { PeriodicJob } from '#core/jobs/periodic_jobs'

/**
 * Short-lived values every service instance shares (a result one instance
 * paid for is reused by the others): in Redis when REDIS_URL is set and its
 * connection is usable, else in the PostgreSQL table `shared_cache`
 * (unlogged: a cache survives no crash and needs no WAL). Values are JSON.
 * Expiry is Redis's own, or the database's clock: instances' clocks never
 * disagree about it. A cache that fails is a miss, never an error: the
 * caller computes the value again.
 */
const REDIS_PREFIX = 'cache:'

/** Concurrent misses of one key in this process share one computation. */
const inFlight = new Map<string, Promise<unknown>>()

function redisStore() {
  if (!env.get('REDIS_URL')) return undefined
  const connection = redis.connection('main')
  // `wait`: a lazy connection that opens on its first command. Through an
  // outage values go to PostgreSQL rather than waiting for Redis.
  return connection.status === 'ready' || connection.status === 'wait' ? connection : undefined
}

export async function cacheGet<T>(key: string): Promise<T | undefined> {
  try {
    const store = redisStore()
    if (store) {
      const text = await store.get(`${REDIS_PREFIX}${key}`)
      return text === null ? undefined : (JSON.parse(text) as T)
    }
    const row = await db
      .from('shared_cache')
      .where('key', key)
      .whereRaw('expires_at > now()')
      .select('value')
      .first()
    return row ? (row.value as T) : undefined
  } catch (error) {
    logger.debug({ err: error, key }, 'shared cache: read failed, treated as a miss')
    return undefined
  }
}

export async function cacheSet(key: string, value: unknown, ttlSeconds: number): Promise<void> {
  const text = JSON.stringify(value)
  try {
    const store = redisStore()
    if (store) {
      await store.set(`${REDIS_PREFIX}${key}`, text, 'EX', ttlSeconds)
      return
    }
    await db.rawQuery(
      `insert into shared_cache (key, value, expires_at)
       values (?, ?::jsonb, now() + (? * interval '1 second'))
       on conflict (key) do update set value = excluded.value, expires_at = excluded.expires_at`,
      [key, text, ttlSeconds]
    )
  } catch (error) {
    logger.debug({ err: error, key }, 'shared cache: write failed')
  }
}

/**
 * The cached value of `key`, else `compute()`'s, kept `ttlSeconds` for
 * every instance. A failed computation is not cached. Concurrent callers in
 * this process share one lookup and one computation: the lookup is part of
 * what they share, so a caller whose read started before another's write
 * landed does not compute again.
 */
export function cached<T>(key: string, ttlSeconds: number, compute: () => Promise<T>): Promise<T> {
  let pending = inFlight.get(key) as Promise<T> | undefined
  if (!pending) {
    pending = (async () => {
      const hit = await cacheGet<T>(key)
      if (hit !== undefined) return hit
      const value = await compute()
      await cacheSet(key, value, ttlSeconds)
      return value
    })().finally(() => inFlight.delete(key))
    inFlight.set(key, pending)
  }
  return pending
}

/** Forgets every value whose key starts with `prefix` (tests; an operator switching sources). */
export async function cacheClear(prefix: string): Promise<void> {
  if (env.get('REDIS_URL')) {
    try {
      const keys = await redis.connection('main').keys(`${REDIS_PREFIX}${prefix}*`)
      if (keys.length > 0) await redis.connection('main').del(...keys)
    } catch {}
  }
  const pattern = `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
  await db.from('shared_cache').whereRaw(`key like ? escape '\\'`, [pattern]).delete()
}

/** Removes expired rows (the periodic `cache.purge` job). */
export async function purgeExpired(): Promise<number> {
  const deleted = await db.from('shared_cache').whereRaw('expires_at <= now()').delete()
  return Number(deleted)
}

/** Registered by start/jobs.ts: the database copy keeps only what has not expired. */
export const purgeExpiredCacheJob: PeriodicJob = {
  name: 'cache.purge',
  everyMs: 10 * 60_000,
  run: () => purgeExpired().then(() => {}),
}
