import { hostname } from 'node:os'
import db from '@adonisjs/lucid/services/db'
import { holderIsGone, INSTANCE_ID } from '#core/jobs/instance'
import { claimLease } from '#runtime/services/runtime_lease'

const PREFIX = 'agent:'

/** How long a lease lasts unrenewed; its holder renews every tick (5 s). */
export const AGENT_LEASE_MS = 20_000

/**
 * Who supervises each process agent of the host: a row of `runtime_leases`
 * named `agent:<id>`, held by the instance that started (or adopted) its
 * process tree and renewed while it runs; released when it stops, sleeps or
 * is given up on. Only the holder starts, stops, puts to sleep or restarts
 * the agent; any other instance asks the holder (peer_link.ts). A holder
 * that died (its pid gone on this host) or stopped renewing loses its
 * leases to whichever instance of the host takes them first.
 */
export class AgentLeases {
  readonly holder = INSTANCE_ID
  /** Held by this instance now (claims, renewals, releases, in order). */
  readonly held = new Set<string>()
  /** When each lease was last claimed or released here (a renewal begun before does not undo it). */
  readonly #changedAt = new Map<string, number>()

  /**
   * Takes the agent's lease (or renews it) unless another live instance
   * holds it; answers that holder otherwise. Atomic: of instances claiming
   * together exactly one wins.
   */
  async claim(agentId: string): Promise<{ held: true } | { held: false; holder: string }> {
    const name = `${PREFIX}${agentId}`
    // The same one-statement upsert as every other lease (runtime_lease.ts).
    if (await claimLease(name, this.holder, AGENT_LEASE_MS)) {
      this.held.add(agentId)
      this.#changedAt.set(agentId, Date.now())
      return { held: true }
    }
    this.#forget(agentId)
    const holder = await this.holderOf(agentId)
    // Released or lapsed between the two statements: try once more.
    if (!holder) return this.claim(agentId)
    return { held: false, holder }
  }

  /** The live holder of the agent's lease, if any (this instance included). */
  async holderOf(agentId: string): Promise<string | undefined> {
    if (this.held.has(agentId)) return this.holder
    const row = await db
      .from('runtime_leases')
      .where('name', `${PREFIX}${agentId}`)
      .where('expires_at', '>', new Date())
      .first()
    return row && !holderIsGone(row.holder) ? row.holder : undefined
  }

  /** Live holders of several agents at once (this instance's included), by agent id. */
  async holdersOf(agentIds: string[]): Promise<Map<string, string>> {
    if (agentIds.length === 0) return new Map()
    const rows = await db
      .from('runtime_leases')
      .whereIn(
        'name',
        agentIds.map((agentId) => `${PREFIX}${agentId}`)
      )
      .where('expires_at', '>', new Date())
    return new Map(
      rows
        .filter((row) => !holderIsGone(row.holder))
        .map((row) => [String(row.name).slice(PREFIX.length), row.holder as string])
    )
  }

  #forget(agentId: string) {
    this.held.delete(agentId)
    this.#changedAt.set(agentId, Date.now())
  }

  /** Renews every lease this instance holds; answers the agents it still holds. */
  async renew(): Promise<Set<string>> {
    const started = Date.now()
    const result = await db.rawQuery(
      `update runtime_leases set expires_at = now() + (? * interval '1 millisecond')
       where holder = ? and name like ?
       returning name`,
      [AGENT_LEASE_MS, this.holder, `${PREFIX}%`]
    )
    const kept = new Set<string>(
      result.rows.map((row: { name: string }) => row.name.slice(PREFIX.length))
    )
    for (const agentId of new Set([...this.held, ...kept])) {
      // Claimed or released while the renewal ran: the renewal did not see that.
      if ((this.#changedAt.get(agentId) ?? 0) >= started) continue
      if (kept.has(agentId)) this.held.add(agentId)
      else this.held.delete(agentId)
    }
    for (const [agentId, at] of this.#changedAt)
      if (at < started - 60_000) this.#changedAt.delete(agentId)
    return new Set(this.held)
  }

  async release(agentId: string): Promise<void> {
    this.#forget(agentId)
    await db
      .from('runtime_leases')
      .where({ name: `${PREFIX}${agentId}`, holder: this.holder })
      .delete()
  }

  /**
   * Lets every lease this instance holds lapse now (a clean shutdown that
   * hands its agents over): the other instances' next tick takes them.
   */
  async lapseAll(): Promise<void> {
    for (const agentId of [...this.held]) this.#forget(agentId)
    await db.rawQuery(
      `update runtime_leases set expires_at = now() - interval '1 second'
       where holder = ? and name like ?`,
      [this.holder, `${PREFIX}%`]
    )
  }

  /** Agents (of `agentIds`, or all) that live other instances hold. */
  async heldByOthers(agentIds?: string[]): Promise<string[]> {
    const query = db
      .from('runtime_leases')
      .where('name', 'like', `${PREFIX}%`)
      .whereNot('holder', this.holder)
      .where('expires_at', '>', new Date())
    if (agentIds)
      query.whereIn(
        'name',
        agentIds.map((agentId) => `${PREFIX}${agentId}`)
      )
    const rows = await query
    return rows
      .filter((row) => !holderIsGone(row.holder))
      .map((row) => String(row.name).slice(PREFIX.length))
  }

  /**
   * Agents of this host whose holder died (its pid is gone) or stopped
   * renewing: theirs to adopt for whoever claims them first.
   */
  async orphans(): Promise<string[]> {
    const rows = await db
      .from('runtime_leases')
      .where('name', 'like', `${PREFIX}%`)
      .whereRaw(`split_part(holder, ':', 1) = ?`, [hostname()])
      .whereNot('holder', this.holder)
    return rows
      .filter((row) => new Date(row.expires_at) < new Date() || holderIsGone(row.holder))
      .map((row) => String(row.name).slice(PREFIX.length))
  }
}
