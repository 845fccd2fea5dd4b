import type { TransactionClientContract } from '@adonisjs/lucid/types/database'

/**
 * In-process cache of what authenticating a request reads: users rows by id
 * and API key rows by id. It takes the database round trip off the hot path
 * of /api/v1 and the dashboard.
 *
 * Staleness is bounded by invalidation, not by time alone:
 * - PostgreSQL triggers NOTIFY every change or deletion of a users or
 *   api_keys row, from any instance and any code path (model save or raw
 *   query); each instance LISTENs (auth_cache_listener) and evicts the row.
 *   NOTIFY is delivered after commit, so a reader that started before an
 *   eviction for the same id does not store what it read.
 * - Writers in this process also evict synchronously (User hooks, the
 *   credit ledger, key revocation), so this instance sees its own changes at
 *   once.
 * - The cache is used only while the LISTEN connection is up; a lost
 *   connection flushes it.
 * - A TTL of 60 s caps anything missed anyway.
 */
const TTL_MS = 60_000
const MAX_ENTRIES = 10_000

interface Entry<T> {
  value: T
  storedAt: number
}

export interface CachedApiKey {
  /** The api_keys columns, as the access-token provider reads them. */
  columns: Record<string, unknown>
  userId: string
}

const users = new Map<string, Entry<Record<string, unknown>>>()
const keys = new Map<string, Entry<CachedApiKey>>()
/** When each id was last evicted: guards against storing a read that raced it. */
const evictedAt = new Map<string, number>()
let flushedAt = 0
let enabled = false

function fresh<T>(map: Map<string, Entry<T>>, id: string): T | undefined {
  if (!enabled) return undefined
  const entry = map.get(id)
  if (!entry) return undefined
  if (Date.now() - entry.storedAt > TTL_MS) {
    map.delete(id)
    return undefined
  }
  return entry.value
}

function mayStore(ids: string[], readStartedAt: number): boolean {
  if (!enabled || readStartedAt <= flushedAt) return false
  return ids.every((id) => (evictedAt.get(id) ?? 0) < readStartedAt)
}

function put<T>(map: Map<string, Entry<T>>, id: string, value: T) {
  if (map.size >= MAX_ENTRIES) {
    const oldest = map.keys().next().value
    if (oldest !== undefined) map.delete(oldest)
  }
  map.set(id, { value, storedAt: Date.now() })
}

let prunedAt = 0

/**
 * Transactions whose balance announcement (NOTIFY `b:`) this instance has
 * processed, with when: kept 10 s, in arrival order.
 */
const announcedTxids = new Map<string, number>()

/** An in-flight read of `id` must not store what it read (it may predate a change). */
function markChanged(id: string, now: number) {
  evictedAt.delete(id)
  evictedAt.set(id, now)
}

/** Replaces the cached row's balance (rows are shared snapshots: never mutated). */
function setBalance(id: string, balance: number) {
  const now = Date.now()
  markChanged(id, now)
  const entry = users.get(id)
  if (entry)
    users.set(id, {
      value: { ...entry.value, ai_credits_balance: balance },
      storedAt: entry.storedAt,
    })
}

function evict(id: string) {
  const now = Date.now()
  users.delete(id)
  keys.delete(id)
  markChanged(id, now)
  // Eviction marks only matter for reads in flight: keep them for 10 s.
  // The map is in eviction order, so pruning stops at the first recent one.
  if (evictedAt.size > MAX_ENTRIES && now - prunedAt > 1000) {
    prunedAt = now
    for (const [evictedId, at] of evictedAt) {
      if (at >= now - 10_000) break
      evictedAt.delete(evictedId)
    }
  }
}

/** Runs now and, inside a transaction, again once it commits. */
function afterCommit(trx: TransactionClientContract | undefined, work: () => void) {
  work()
  trx?.after('commit', work)
}

export const authCache = {
  /** Milliseconds timestamp to pass to `store*` (taken before the read). */
  now: () => Date.now(),

  user: (id: string) => fresh(users, id),
  apiKey: (id: string) => fresh(keys, id),

  storeUser(row: Record<string, unknown>, readStartedAt: number) {
    const id = String(row.id)
    if (mayStore([id], readStartedAt)) put(users, id, row)
  },

  storeApiKey(key: CachedApiKey, userRow: Record<string, unknown>, readStartedAt: number) {
    const keyId = String(key.columns.id)
    if (!mayStore([keyId, key.userId], readStartedAt)) return
    put(keys, keyId, key)
    put(users, key.userId, userRow)
  },

  /** A users row changed or was deleted (in `trx`, when given). */
  forgetUser(id: string, trx?: TransactionClientContract) {
    afterCommit(trx, () => evict(id))
  },

  /**
   * The listener: a transaction `txid` changed only the balance of users
   * row `id` to `balance`. Announcements arrive in commit order, so the
   * latest one processed is the current balance.
   */
  balanceAnnounced(id: string, balance: number, txid: string) {
    const now = Date.now()
    announcedTxids.set(txid, now)
    if (announcedTxids.size > 1000) {
      for (const [seen, at] of announcedTxids) {
        if (at >= now - 10_000) break
        announcedTxids.delete(seen)
      }
    }
    setBalance(id, balance)
  },

  /**
   * This process committed transaction `txid`, which changed only the
   * balance of `id` to `balance` (read your own writes at once, without
   * waiting for the announcement). When the announcement was processed
   * already, later ones may have been too, so the cache is left as it is:
   * it holds this balance or a newer one. Otherwise nothing later than this
   * commit can have been processed, and its own announcement is still to
   * come (it rewrites the same value).
   */
  balanceChanged(id: string, balance: number, txid: string) {
    if (announcedTxids.has(txid)) return
    setBalance(id, balance)
  },

  /** An api_keys row changed or was deleted. */
  forgetApiKey(id: string) {
    evict(id)
  },

  /** Invalidation source (up) or lost (down): either way start empty. */
  setEnabled(value: boolean) {
    enabled = value
    users.clear()
    keys.clear()
    flushedAt = Date.now()
  },

  get enabled() {
    return enabled
  },
}
