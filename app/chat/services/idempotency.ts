import { createHash, randomUUID } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import { chatConfig } from '#config/chat'
import { RateLimitExceededException, ValidationException } from '#core/exceptions/api_exceptions'
import type { PeriodicJob } from '#core/jobs/periodic_jobs'

/**
 * `Idempotency-Key` on the chat routes: the first request with a key runs
 * and its successful answer is stored for 24 h; a retry with the same key
 * (same caller, same route, same body) gets that answer again without
 * running or charging anything.
 *
 * - Concurrent duplicate while the first is still running: 429 with Retry-After
 *   (retry later) - the second never waits, so no request holds a
 *   connection open on another's behalf.
 * - The same key with a different body: 400 VALIDATION_ERROR.
 * - A failed first request stores nothing: the key is free again.
 * - A key left pending longer than `pendingStaleMs` (its instance died) is
 *   taken over by the next request.
 */
export const IDEMPOTENCY_HEADER = 'idempotency-key'

export interface IdempotencyScope {
  /** Whose key space: a user id, or `webhook:<agentId>`. */
  scope: string
  /** The route, e.g. `api.chat`. */
  route: string
  key: string
  /** Anything identifying the request (agent id and body). */
  request: unknown
}

export type IdempotencyStart =
  { replay: true; statusCode: number; response: any } | { replay: false; ticket: IdempotencyTicket }

export interface IdempotencyTicket {
  /** Stores the answer for retries. */
  complete(response: unknown, statusCode?: number): Promise<void>
  /** Frees the key (the request failed). */
  release(): Promise<void>
}

const KEY = /^[\x21-\x7e]{1,255}$/

/** The header's value, checked; null when the header is absent. */
export function idempotencyKeyOf(header: string | null | undefined): string | null {
  if (header === undefined || header === null) return null
  const key = header.trim()
  if (!KEY.test(key)) {
    throw new ValidationException(
      'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces'
    )
  }
  return key
}

function fingerprintOf(request: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify(request ?? null))
    .digest('hex')
}

function ticketFor(id: string): IdempotencyTicket {
  let finished = false
  return {
    async complete(response, statusCode = 200) {
      if (finished) return
      finished = true
      await db.rawQuery(
        `update chat_idempotency_keys set state = 'done', status_code = ?, response = ?::jsonb,
                expires_at = now() + (? || ' milliseconds')::interval
          where id = ?`,
        [statusCode, JSON.stringify(response ?? null), String(chatConfig.idempotency.ttlMs), id]
      )
    },
    async release() {
      if (finished) return
      finished = true
      await db.rawQuery(`delete from chat_idempotency_keys where id = ? and state = 'pending'`, [
        id,
      ])
    },
  }
}

export async function startIdempotent(scope: IdempotencyScope): Promise<IdempotencyStart> {
  const fingerprint = fingerprintOf(scope.request)
  const ttl = String(chatConfig.idempotency.ttlMs)
  for (let attempt = 0; attempt < 3; attempt++) {
    const id = randomUUID()
    const inserted = await db.rawQuery(
      `insert into chat_idempotency_keys
         (id, scope, route, key, fingerprint, state, created_at, expires_at)
       values (?, ?, ?, ?, ?, 'pending', now(), now() + (? || ' milliseconds')::interval)
       on conflict (scope, route, key) do nothing
       returning id`,
      [id, scope.scope, scope.route, scope.key, fingerprint, ttl]
    )
    if (inserted.rows.length > 0) return { replay: false, ticket: ticketFor(id) }

    const found = await db.rawQuery(
      `select id, fingerprint, state, status_code, response, created_at, expires_at
         from chat_idempotency_keys where scope = ? and route = ? and key = ?`,
      [scope.scope, scope.route, scope.key]
    )
    const row = found.rows[0]
    if (!row) continue // deleted meanwhile: try again
    if (new Date(row.expires_at).getTime() <= Date.now()) {
      await db.rawQuery('delete from chat_idempotency_keys where id = ? and expires_at <= now()', [
        row.id,
      ])
      continue
    }
    if (row.fingerprint !== fingerprint) {
      throw new ValidationException(
        'This Idempotency-Key was already used with a different request; use a new key'
      )
    }
    if (row.state === 'done') {
      return { replay: true, statusCode: row.status_code ?? 200, response: row.response }
    }
    const stale =
      Date.now() - new Date(row.created_at).getTime() > chatConfig.idempotency.pendingStaleMs
    if (stale) {
      const taken = await db.rawQuery(
        `update chat_idempotency_keys set created_at = now() where id = ? and state = 'pending'
            and created_at = ? returning id`,
        [row.id, row.created_at]
      )
      if (taken.rows.length > 0) return { replay: false, ticket: ticketFor(row.id) }
      continue
    }
    throw RateLimitExceededException.retryAfter(
      'A request with this Idempotency-Key is still being processed; retry shortly',
      1
    )
  }
  throw RateLimitExceededException.retryAfter('This Idempotency-Key is busy; retry shortly', 1)
}

/** Job: forgets keys older than their 24 h. */
export async function purgeExpiredIdempotencyKeys(): Promise<number> {
  const result = await db.rawQuery('delete from chat_idempotency_keys where expires_at < now()')
  return result.rowCount ?? 0
}

/** Registered by start/jobs.ts: purges the expired keys every hour. */
export const purgeExpiredIdempotencyKeysJob: PeriodicJob = {
  name: 'chat.purge_idempotency_keys',
  everyMs: 60 * 60_000,
  run: async () => {
    await purgeExpiredIdempotencyKeys()
  },
}
