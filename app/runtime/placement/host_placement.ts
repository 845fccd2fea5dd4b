import { AgentLocks } from '#runtime/process/agent_locks'
import { AgentLeases } from '#runtime/placement/agent_leases'
import { InstanceRegistry, type PeerInstance } from '#runtime/placement/instance_registry'
import { PeerLink } from '#runtime/placement/peer_link'

/** Where an operation on an agent runs: here, or on the live peer holding it. */
export type Placement = { here: true } | { here: false; peer: PeerInstance }

/** What the placement asks of the runtime service of this instance. */
export interface Supervision {
  /** Agents whose process trees this instance supervises now. */
  live(): string[]
  /** Agents this instance has any use for now (running, booting, queued, an operation under way). */
  inUse(agentId: string): boolean
  /** Its lease went to another instance (this one stalled): stop supervising, stop nothing. */
  lost(agentId: string): void
}

export interface HostPlacementOptions {
  /** APP_KEY: the peer link's token is derived from it. */
  secret: string
  /** How often leases are renewed and orphans looked for. Default 5 s. */
  tickMs?: number
  log?: (message: string, detail?: Record<string, unknown>) => void
}

/** Consecutive ticks a held lease may go unused before it is given up. */
const IDLE_TICKS = 3

/**
 * The instances of one host acting as one (docs/runtime.md "Many
 * machines"): which instance supervises each process agent (a lease in
 * PostgreSQL, agent_leases.ts), how the others reach it (the peer link,
 * peer_link.ts, found through runtime_instances), and the tick that keeps
 * it so: every 5 s it renews this instance's leases, stops supervising
 * what it lost, gives up leases it holds for nothing, and claims the
 * agents of instances of this host that died (SIGKILL, OOM) or stalled,
 * handing them to `onOrphans` to adopt: their processes keep running.
 */
export class HostPlacement {
  readonly leases = new AgentLeases()
  readonly link: PeerLink
  readonly registry: InstanceRegistry
  /** Claims and releases of each agent's lease, one at a time, in the order asked. */
  readonly #order = new AgentLocks()
  /** Agents held here but unused, by consecutive ticks. */
  readonly #idle = new Map<string, number>()
  /** Messages (false) and turns (true) for agents held elsewhere, sent in batches. */
  readonly #activity = new Map<string, boolean>()
  #activityTimer?: NodeJS.Timeout
  #timer?: NodeJS.Timeout
  #ticking?: Promise<void>
  #ticks = 0
  #stopping = false
  #supervision?: Supervision
  #orphans: (agentIds: string[]) => Promise<void> = async () => {}

  constructor(private readonly options: HostPlacementOptions) {
    this.link = new PeerLink(options.secret)
    this.registry = new InstanceRegistry(() => this.link.url)
  }

  #log(message: string, detail?: Record<string, unknown>) {
    this.options.log?.(message, detail)
  }

  /** Listens for peers, says so in runtime_instances, and ticks. */
  async start(supervision: Supervision): Promise<void> {
    this.#supervision = supervision
    await this.link.listen()
    await this.registry.heartbeat()
    this.#timer = setInterval(() => void this.tick(), this.options.tickMs ?? 5000)
    this.#timer.unref()
  }

  /** Who adopts the agents claimed from a dead or stalled instance (the agents area). */
  onOrphans(handler: (agentIds: string[]) => Promise<void>) {
    this.#orphans = handler
  }

  heldHere(agentId: string): boolean {
    return this.leases.held.has(agentId)
  }

  /**
   * Where an operation on the agent runs. `claim` (a start): here when this
   * instance holds or takes the lease. `locate`: here unless a live peer
   * holds it (an agent nobody holds is acted on here without a claim).
   */
  async where(agentId: string, mode: 'claim' | 'locate'): Promise<Placement> {
    if (this.heldHere(agentId)) return { here: true }
    let holder: string | undefined
    if (mode === 'claim') {
      const claimed = await this.claim(agentId)
      if (claimed.held) return { here: true }
      holder = claimed.holder
    } else {
      holder = await this.leases.holderOf(agentId)
      if (!holder || holder === this.leases.holder) return { here: true }
    }
    const peer = await this.registry.peer(holder)
    // A holder that left no address (gone since): claimable at the next look.
    if (!peer) return mode === 'claim' ? this.where(agentId, 'claim') : { here: true }
    return { here: false, peer }
  }

  /** Takes the agent's lease unless a live peer holds it (in order with its releases). */
  claim(agentId: string) {
    return this.#order.exclusive(agentId, () => this.leases.claim(agentId))
  }

  /** Gives the agent's lease up (it stopped, slept, failed or went away here). */
  release(agentId: string): Promise<void> {
    return this.#order.exclusive(agentId, () => this.leases.release(agentId))
  }

  /** Agents live peers hold (a sweep here leaves them alone). */
  async heldElsewhere(agentIds?: string[]): Promise<string[]> {
    return this.leases.heldByOthers(agentIds)
  }

  /** A message (or a turn) for an agent held elsewhere: told to its holder within 250 ms. */
  noteActivity(agentId: string, turn: boolean) {
    this.#activity.set(agentId, this.#activity.get(agentId) === true || turn)
    this.#activityTimer ??= setTimeout(() => void this.#sendActivity(), 250)
    this.#activityTimer.unref?.()
  }

  async #sendActivity() {
    this.#activityTimer = undefined
    const batch = new Map(this.#activity)
    this.#activity.clear()
    try {
      const holders = await this.leases.holdersOf([...batch.keys()])
      const byHolder = new Map<string, string[]>()
      for (const [agentId, holder] of holders) {
        if (holder !== this.leases.holder)
          byHolder.set(holder, [...(byHolder.get(holder) ?? []), agentId])
      }
      for (const [holder, agentIds] of byHolder) {
        const peer = await this.registry.peer(holder)
        if (!peer) continue
        const turns = agentIds.filter((agentId) => batch.get(agentId))
        await this.link.call(peer.peerUrl, 'activity', [agentIds, turns], 5_000)
      }
    } catch (error) {
      this.#log('placement: activity not passed on', { error: (error as Error).message })
    }
  }

  /** One round: heartbeat, renewals, lost and idle leases, orphans. */
  tick(): Promise<void> {
    this.#ticking ??= this.#tick()
      .catch((error) => this.#log('placement: tick failed', { error: String(error) }))
      .finally(() => (this.#ticking = undefined))
    return this.#ticking
  }

  async #tick() {
    const supervision = this.#supervision
    if (!supervision) return
    await this.registry.heartbeat()
    const kept = await this.leases.renew()
    for (const agentId of supervision.live()) {
      if (kept.has(agentId) || this.#order.busy(agentId)) continue
      this.#log('placement: lease lost to another instance; no longer supervising', { agentId })
      supervision.lost(agentId)
    }
    for (const agentId of kept) {
      const idle =
        supervision.inUse(agentId) || this.#order.busy(agentId)
          ? 0
          : (this.#idle.get(agentId) ?? 0) + 1
      if (idle < IDLE_TICKS) this.#idle.set(agentId, idle)
      else {
        this.#idle.delete(agentId)
        await this.release(agentId)
      }
    }
    for (const agentId of this.#idle.keys()) if (!kept.has(agentId)) this.#idle.delete(agentId)
    if (!this.#stopping) await this.#adoptOrphans()
    if (++this.#ticks % 60 === 0) await this.registry.prune()
  }

  /** Claims the agents of this host's dead or stalled instances and hands them on. */
  async #adoptOrphans() {
    const won: string[] = []
    for (const agentId of await this.leases.orphans()) {
      const { held } = await this.claim(agentId)
      if (held) won.push(agentId)
    }
    if (won.length === 0) return
    this.#log('placement: adopting the agents of an instance that died or stalled', {
      agents: won.length,
    })
    await this.#orphans(won)
  }

  /**
   * A clean shutdown: nothing more is adopted here; when another instance
   * of the host lives, this one lets go of its agents (`letGo`: stops
   * supervising them) and its leases lapse at once, so that instance adopts
   * them on its next tick (they keep running). True when they were handed
   * over. Each instance says it is stopping before it looks for a peer, so
   * of two stopping together at least one sees the other and keeps its own.
   */
  async handOver(letGo: () => void): Promise<boolean> {
    this.#stopping = true
    await this.#ticking
    await this.registry.markStopping()
    const peers = await this.registry.livePeers()
    if (peers.length === 0) return false
    letGo()
    await this.leases.lapseAll()
    return true
  }

  /** Stops ticking and listening, and leaves runtime_instances (the end of a shutdown). */
  async stop(): Promise<void> {
    this.#stopping = true
    clearInterval(this.#timer)
    clearTimeout(this.#activityTimer)
    await this.#ticking
    await this.link.close()
    await this.registry.remove().catch(() => {})
  }
}
