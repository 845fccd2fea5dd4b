import { hostname } from 'node:os'
import db from '@adonisjs/lucid/services/db'
import type { QueryClientContract, TransactionClientContract } from '@adonisjs/lucid/types/database'
import { holderIsGone, INSTANCE_ID } from '#core/jobs/instance'
import { AgentLocks } from '#runtime/process/agent_locks'
import type { CapacitySnapshot } from '#runtime/capacity/capacity_manager'

/** A start as the host's book knows it. */
export interface BookEntry {
  agentId: string
  reservedMb: number
  interactive: boolean
  resumes: boolean
}

export interface BookLimits {
  bootConcurrency: number
  memoryBudgetMb: number
}

/** What a capacity manager asks of a book the instances of its host share. */
export interface SharedBook {
  /**
   * Admits the start when a boot slot and its memory are free on the host
   * and no start of another instance waits ahead of it (recorded as
   * booting); otherwise the host's idle admitted agents, least recently
   * active first, that could be put to sleep for room (none: wait).
   */
  admit(entry: BookEntry, limits: BookLimits): Promise<{ admitted: true } | { victims: string[] }>
  /** The start waits in this instance's queue (host-wide counts and order). */
  queue(entry: BookEntry): void
  /** A container that runs already (adopted): counted, no boot slot. */
  adopt(agentId: string, reservedMb: number): void
  booted(agentId: string): void
  release(agentId: string): void
  touch(agentId: string): void
  /** Starts of other instances waiting ahead of `entry`. */
  waitingAhead(entry: BookEntry): Promise<number>
  snapshot(limits: BookLimits): Promise<CapacitySnapshot>
}

interface Row {
  agent_id: string
  instance: string
  reserved_mb: number
  booting: boolean
  queued: boolean
  interactive: boolean
  resumes: boolean
  arrived_at: Date
  last_active_at: Date
}

/** A message is written to the book at most this often per agent (the LRU order needs no more). */
const TOUCH_EVERY_MS = 10_000
/** An instance whose row in runtime_instances is older than this counts for nothing. */
const LIVE_WITHIN = "interval '20 seconds'"

/** The boot queue's tiers (capacity_manager.ts): interactive resumes first, background boots last. */
function tier(entry: { interactive: boolean; resumes: boolean }): number {
  return (entry.interactive ? 0 : 2) + (entry.resumes ? 0 : 1)
}

/** tier() of a runtime_capacity row `c`, in SQL. */
const TIER_SQL =
  '((case when c.interactive then 0 else 2 end) + (case when c.resumes then 0 else 1 end))'

/** Starts other instances hold in their queues that go before `entry` (which arrived at `arrived`). */
function aheadOf(rows: Row[], entry: BookEntry, arrived: Date): number {
  return rows.filter(
    (row) =>
      row.queued &&
      row.instance !== INSTANCE_ID &&
      (tier(row) < tier(entry) || (tier(row) === tier(entry) && row.arrived_at < arrived))
  ).length
}

/**
 * One capacity book per host in PostgreSQL (`runtime_capacity`; docs/
 * runtime.md "Many machines"): the instances of a host share one memory
 * budget, one set of boot slots and one queue order, as one instance's
 * capacity manager alone did before. Admissions are decided under a
 * per-host advisory lock, so two instances never both take the last slot
 * or the last megabytes. Each instance keeps its own queue's fair order
 * (accounts taking turns); across instances a start goes first by tier
 * and arrival. Rows of an instance that died (its pid gone) or stopped
 * renewing count for nothing; the instance adopting its agents writes them
 * again. Each agent's writes go out in order, in the background.
 */
export class HostCapacityBook implements SharedBook {
  readonly #host = hostname()
  readonly #writes = new AgentLocks()
  readonly #touched = new Map<string, number>()

  constructor(
    private readonly log: (message: string, detail?: Record<string, unknown>) => void = () => {}
  ) {}

  #write(agentId: string, sql: string, bindings: unknown[]) {
    void this.#writes
      .exclusive(agentId, () => db.rawQuery(sql, bindings))
      .catch((error) =>
        this.log('capacity book: a write failed', { agentId, error: (error as Error).message })
      )
  }

  /** Rows of live instances of this host (those of dead ones are deleted on the way). */
  async #rows(client: QueryClientContract | TransactionClientContract = db.connection()) {
    const result = await client.rawQuery(
      `select c.* from runtime_capacity c
       where c.host = ? and (c.instance = ? or c.instance in (
         select id from runtime_instances where seen_at > now() - ${LIVE_WITHIN}))`,
      [this.#host, INSTANCE_ID]
    )
    const rows = result.rows as Row[]
    const dead = rows.filter((row) => row.instance !== INSTANCE_ID && holderIsGone(row.instance))
    if (dead.length > 0) {
      await client.rawQuery(
        'delete from runtime_capacity where agent_id = any(?) and instance = any(?)',
        [dead.map((row) => row.agent_id), dead.map((row) => row.instance)]
      )
    }
    return rows.filter((row) => !dead.includes(row))
  }

  async admit(entry: BookEntry, limits: BookLimits) {
    await this.#writes.exclusive(entry.agentId, async () => {})
    return db.transaction(async (trx) => {
      await trx.rawQuery('select pg_advisory_xact_lock(hashtext(?))', [
        `runtime-capacity:${this.#host}`,
      ])
      const all = await this.#rows(trx)
      const arrived = all.find((row) => row.agent_id === entry.agentId)?.arrived_at ?? new Date()
      const rows = all.filter((row) => row.agent_id !== entry.agentId)
      const admitted = rows.filter((row) => !row.queued)
      const booting = admitted.filter((row) => row.booting).length
      const reservedMb = admitted.reduce((sum, row) => sum + row.reserved_mb, 0)
      if (aheadOf(rows, entry, arrived) > 0) return { victims: [] }
      // Memory is made while the slots boot (capacity_manager.ts #room). An agent larger than
      // the whole budget still runs alone rather than never.
      if (reservedMb + entry.reservedMb > limits.memoryBudgetMb && admitted.length > 0) {
        const idle = admitted.filter((row) => !row.booting)
        idle.sort((a, b) => a.last_active_at.getTime() - b.last_active_at.getTime())
        return { victims: idle.map((row) => row.agent_id) }
      }
      if (booting >= limits.bootConcurrency) return { victims: [] }
      await trx.rawQuery(
        `insert into runtime_capacity (agent_id, host, instance, reserved_mb, booting, queued,
           interactive, resumes)
         values (?, ?, ?, ?, true, false, ?, ?)
         on conflict (agent_id) do update set host = excluded.host, instance = excluded.instance,
           reserved_mb = excluded.reserved_mb, booting = true, queued = false,
           last_active_at = now()`,
        [entry.agentId, this.#host, INSTANCE_ID, entry.reservedMb, entry.interactive, entry.resumes]
      )
      return { admitted: true as const }
    })
  }

  queue(entry: BookEntry) {
    this.#write(
      entry.agentId,
      `insert into runtime_capacity (agent_id, host, instance, reserved_mb, booting, queued,
         interactive, resumes)
       values (?, ?, ?, ?, false, true, ?, ?)
       on conflict (agent_id) do update set host = excluded.host, instance = excluded.instance,
         reserved_mb = excluded.reserved_mb, queued = true, booting = false,
         interactive = excluded.interactive, resumes = excluded.resumes`,
      [entry.agentId, this.#host, INSTANCE_ID, entry.reservedMb, entry.interactive, entry.resumes]
    )
  }

  adopt(agentId: string, reservedMb: number) {
    this.#write(
      agentId,
      `insert into runtime_capacity (agent_id, host, instance, reserved_mb)
       values (?, ?, ?, ?)
       on conflict (agent_id) do update set host = excluded.host, instance = excluded.instance,
         reserved_mb = excluded.reserved_mb, queued = false, booting = false, last_active_at = now()`,
      [agentId, this.#host, INSTANCE_ID, reservedMb]
    )
  }

  booted(agentId: string) {
    this.#write(
      agentId,
      'update runtime_capacity set booting = false where agent_id = ? and instance = ?',
      [agentId, INSTANCE_ID]
    )
  }

  release(agentId: string) {
    this.#touched.delete(agentId)
    this.#write(agentId, 'delete from runtime_capacity where agent_id = ? and instance = ?', [
      agentId,
      INSTANCE_ID,
    ])
  }

  touch(agentId: string) {
    if (Date.now() - (this.#touched.get(agentId) ?? 0) < TOUCH_EVERY_MS) return
    this.#touched.set(agentId, Date.now())
    this.#write(
      agentId,
      'update runtime_capacity set last_active_at = now() where agent_id = ? and instance = ?',
      [agentId, INSTANCE_ID]
    )
  }

  /**
   * Counted in PostgreSQL, a row per other instance: every status of a
   * queued agent asks it, and reading the whole book for each (a burst's
   * 200 rows) had the service parse 400 dates per answer.
   */
  async waitingAhead(entry: BookEntry): Promise<number> {
    const result = await db.rawQuery(
      `select c.instance, count(*)::int as ahead from runtime_capacity c
       where c.host = ? and c.queued and c.instance <> ?
         and c.instance in (select id from runtime_instances where seen_at > now() - ${LIVE_WITHIN})
         and (${TIER_SQL} < ? or (${TIER_SQL} = ? and c.arrived_at < coalesce(
           (select arrived_at from runtime_capacity where agent_id = ?), now())))
       group by c.instance`,
      [this.#host, INSTANCE_ID, tier(entry), tier(entry), entry.agentId]
    )
    return (result.rows as { instance: string; ahead: number }[])
      .filter((row) => !holderIsGone(row.instance))
      .reduce((sum, row) => sum + row.ahead, 0)
  }

  async snapshot(limits: BookLimits): Promise<CapacitySnapshot> {
    const rows = await this.#rows()
    const admitted = rows.filter((row) => !row.queued)
    const booting = admitted.filter((row) => row.booting).length
    return {
      ...limits,
      reservedMb: admitted.reduce((sum, row) => sum + row.reserved_mb, 0),
      booting,
      running: admitted.length - booting,
      queued: rows.length - admitted.length,
      queuedBackground: rows.filter((row) => row.queued && !row.interactive).length,
    }
  }
}
