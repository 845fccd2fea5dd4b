/**
 * Admission of agent containers on this host: at most `bootConcurrency`
 * boot at once, and the memory all admitted agents reserve (each its
 * plugin's memory limit, so the host never overcommits) stays within
 * `memoryBudgetMb`. A start that does not fit first puts the least
 * recently used idle agent to sleep (through `sleep`); when nothing can be
 * put to sleep it waits in the queue and is reported `queued`. Nothing is
 * refused: a start waits until it fits.
 *
 * The queue is fair (docs/runtime.md "Boot queue order"): interactive
 * starts (a message, an owner's start) go before background ones (a
 * pre-boot of a new agent, recovery), checkpoint resumes before cold
 * boots within each class, and within one of those tiers the accounts
 * take turns (round robin by owner), so one account's burst never holds
 * another account's first agent back. A background start never puts an
 * agent to sleep to make room. `order: 'fifo'` restores the earlier order
 * (resumes first, then arrival; every start may make room): the bench's
 * baseline only.
 *
 * State is this process's own: it admits the containers this instance's
 * driver runs (the process driver's agents live on this host).
 */
/** A queued start that was cancelled (the agent was stopped or removed while it waited). */
export class BootCancelledError extends Error {
  constructor() {
    super('the start was cancelled while it waited in the boot queue')
  }
}

/** Interactive: someone waits on it (a message, an owner's start). Background: ahead of time. */
export type BootPriority = 'interactive' | 'background'
export type BootQueueOrder = 'fair' | 'fifo'

export interface AdmitOptions {
  /** Its start resumes a checkpoint rather than boots. */
  resumes?: boolean
  /** The owning account: accounts take turns. Default: the agent counts as its own account. */
  owner?: string
  /** Default interactive. */
  priority?: BootPriority
}

export interface CapacitySettings {
  bootConcurrency: number
  memoryBudgetMb: number
  /** Default fair. */
  order?: BootQueueOrder
  /** Puts an admitted agent to sleep to make room; resolves once its container is stopped. */
  sleep: (agentId: string) => Promise<void>
  log?: (message: string, detail?: Record<string, unknown>) => void
}

interface Admitted {
  reservedMb: number
  lastActiveAt: number
  /** Increases with every admission and message: the LRU order, even within one millisecond. */
  recency: number
  booting: boolean
}

interface Waiting {
  agentId: string
  owner: string
  reservedMb: number
  /** Its start resumes a checkpoint rather than boots. */
  resumes: boolean
  priority: BootPriority
  /** Arrival order. */
  seq: number
  resolve: () => void
  reject: (error: Error) => void
}

export interface CapacitySnapshot {
  bootConcurrency: number
  memoryBudgetMb: number
  reservedMb: number
  booting: number
  running: number
  queued: number
  /** Of `queued`, the background starts (pre-boots, recovery). */
  queuedBackground: number
}

export class CapacityManager {
  readonly #admitted = new Map<string, Admitted>()
  readonly #queue: Waiting[] = []
  /** Agents being put to sleep to make room (not chosen twice). */
  readonly #evicting = new Set<string>()
  #pumping = false
  #recency = 0
  #seq = 0
  /** Increases with every admission: when each account was last served (round robin). */
  #turn = 0
  readonly #served = new Map<string, number>()
  /** Agents a message or start asked for before their start reached the queue: admitted interactive. */
  readonly #wanted = new Set<string>()

  constructor(private readonly settings: CapacitySettings) {}

  get bootConcurrency() {
    return this.settings.bootConcurrency
  }

  /**
   * Resolves when the agent may boot: a boot slot and its memory are its
   * until `booted()` (slot) and `release()` (memory). An agent already
   * admitted resolves at once; one already waiting keeps its place (an
   * interactive start upgrades a waiting background one).
   */
  admit(agentId: string, reservedMb: number, options: AdmitOptions = {}): Promise<void> {
    if (this.#admitted.has(agentId)) return Promise.resolve()
    const wanted = this.#wanted.delete(agentId)
    const priority: BootPriority = wanted ? 'interactive' : (options.priority ?? 'interactive')
    const queued = this.#queue.find((entry) => entry.agentId === agentId)
    if (queued) {
      if (priority === 'interactive') this.#upgrade(queued)
      return new Promise((resolve, reject) => {
        const { resolve: first, reject: firstReject } = queued
        queued.resolve = () => (first(), resolve())
        queued.reject = (error) => (firstReject(error), reject(error))
      })
    }
    const admission = new Promise<void>((resolve, reject) => {
      this.#queue.push({
        agentId,
        owner: options.owner ?? agentId,
        reservedMb,
        resumes: options.resumes === true,
        priority,
        seq: ++this.#seq,
        resolve,
        reject,
      })
    })
    void this.#pump()
    return admission
  }

  /**
   * Someone waits on this agent now (a message, an owner's start): a
   * waiting background start becomes interactive, in place; a start not
   * yet queued will be. No effect on an admitted agent.
   */
  prioritize(agentId: string): void {
    if (this.#admitted.has(agentId)) return
    const queued = this.#queue.find((entry) => entry.agentId === agentId)
    if (queued) this.#upgrade(queued)
    else this.#wanted.add(agentId)
  }

  #upgrade(entry: Waiting) {
    if (entry.priority === 'interactive') return
    entry.priority = 'interactive'
    void this.#pump()
  }

  /** A container that already runs (adopted after a service restart): counted, no boot slot. */
  adopt(agentId: string, reservedMb: number) {
    if (this.#admitted.has(agentId)) return
    this.#admitted.set(agentId, {
      reservedMb,
      lastActiveAt: Date.now(),
      recency: ++this.#recency,
      booting: false,
    })
  }

  /** Its boot ended (ready, failed or gave up): the boot slot is free. */
  booted(agentId: string) {
    const entry = this.#admitted.get(agentId)
    if (!entry?.booting) return
    entry.booting = false
    void this.#pump()
  }

  /** Its container stopped (stop, sleep, removal, given up): its memory is free. */
  release(agentId: string) {
    this.#wanted.delete(agentId)
    const queued = this.#queue.findIndex((entry) => entry.agentId === agentId)
    if (queued >= 0) {
      const [entry] = this.#queue.splice(queued, 1)
      entry.reject(new BootCancelledError())
    }
    if (this.#admitted.delete(agentId)) void this.#pump()
  }

  /** Service shutdown: every start waiting for its turn fails with BootCancelledError. */
  cancelQueued() {
    this.#wanted.clear()
    for (const entry of this.#queue.splice(0)) entry.reject(new BootCancelledError())
  }

  /** A message for the agent: it is the last to be put to sleep for room. */
  touch(agentId: string) {
    const entry = this.#admitted.get(agentId)
    if (!entry) return
    entry.lastActiveAt = Date.now()
    entry.recency = ++this.#recency
  }

  isQueued(agentId: string): boolean {
    return this.#queue.some((entry) => entry.agentId === agentId)
  }

  /** Its 1-based place in the order admissions go, while it waits; else null. */
  queuePosition(agentId: string): number | null {
    if (!this.isQueued(agentId)) return null
    return this.#ordered().findIndex((entry) => entry.agentId === agentId) + 1
  }

  /** The waiting agents in the order they are to be admitted. */
  queueOrder(): string[] {
    return this.#ordered().map((entry) => entry.agentId)
  }

  isAdmitted(agentId: string): boolean {
    return this.#admitted.has(agentId)
  }

  /** Admitted agents, least recently active first. */
  admittedAgents(): Array<{ agentId: string; lastActiveAt: number; booting: boolean }> {
    return [...this.#admitted.entries()]
      .sort(([, a], [, b]) => a.recency - b.recency)
      .map(([agentId, entry]) => ({
        agentId,
        lastActiveAt: entry.lastActiveAt,
        booting: entry.booting,
      }))
  }

  snapshot(): CapacitySnapshot {
    let reservedMb = 0
    let booting = 0
    for (const entry of this.#admitted.values()) {
      reservedMb += entry.reservedMb
      if (entry.booting) booting++
    }
    return {
      bootConcurrency: this.settings.bootConcurrency,
      memoryBudgetMb: this.settings.memoryBudgetMb,
      reservedMb,
      booting,
      running: this.#admitted.size - booting,
      queued: this.#queue.length,
      queuedBackground: this.#queue.filter((entry) => entry.priority === 'background').length,
    }
  }

  /**
   * The queue in admission order. Fair: tiers (interactive resumes,
   * interactive boots, background resumes, background boots); within a
   * tier the accounts take turns, the least recently served first (one
   * never served by its oldest entry), each account's own starts in
   * arrival order. Computed from the books, so the place it reports is the
   * place the pump uses.
   */
  #ordered(): Waiting[] {
    const byArrival = [...this.#queue].sort((a, b) => a.seq - b.seq)
    if (this.#fifo) {
      // The earlier order: resumes before boots, then arrival.
      return byArrival.sort((a, b) => Number(b.resumes) - Number(a.resumes))
    }
    const tier = (entry: Waiting) =>
      (entry.priority === 'interactive' ? 0 : 2) + (entry.resumes ? 0 : 1)
    const served = new Map(this.#served)
    let turn = this.#turn
    const ordered: Waiting[] = []
    for (let rank = 0; rank < 4; rank++) {
      const byOwner = new Map<string, Waiting[]>()
      for (const entry of byArrival) {
        if (tier(entry) !== rank) continue
        const own = byOwner.get(entry.owner)
        if (own) own.push(entry)
        else byOwner.set(entry.owner, [entry])
      }
      const owners = [...byOwner.entries()].sort(
        ([a, first], [b, second]) =>
          (served.get(a) ?? -1) - (served.get(b) ?? -1) || first[0].seq - second[0].seq
      )
      for (let round = 0; ; round++) {
        let any = false
        for (const [owner, entries] of owners) {
          if (round >= entries.length) continue
          ordered.push(entries[round])
          served.set(owner, ++turn)
          any = true
        }
        if (!any) break
      }
    }
    return ordered
  }

  get #fifo(): boolean {
    return this.settings.order === 'fifo'
  }

  #take(head: Waiting) {
    this.#queue.splice(this.#queue.indexOf(head), 1)
    this.#served.set(head.owner, ++this.#turn)
    // Turns only matter among accounts that wait: an empty queue starts afresh.
    if (this.#queue.length === 0) this.#served.clear()
    this.#admitted.set(head.agentId, {
      reservedMb: head.reservedMb,
      lastActiveAt: Date.now(),
      recency: ++this.#recency,
      booting: true,
    })
    head.resolve()
  }

  /** Admits in order while it fits; makes room by putting idle agents to sleep. */
  async #pump(): Promise<void> {
    if (this.#pumping) return
    this.#pumping = true
    try {
      while (this.#queue.length > 0) {
        const { reservedMb, booting } = this.snapshot()
        if (booting >= this.settings.bootConcurrency) return
        const head = this.#ordered()[0]
        const fits = reservedMb + head.reservedMb <= this.settings.memoryBudgetMb
        // An agent larger than the whole budget still runs alone rather than never.
        const alone = this.#admitted.size === 0
        if (fits || alone) {
          this.#take(head)
          continue
        }
        // A boot ahead of time never costs a running agent its container. It is the
        // head only when no interactive start waits, so it blocks nobody.
        if (head.priority === 'background' && !this.#fifo) return
        const victim = this.admittedAgents().find(
          (entry) => !entry.booting && !this.#evicting.has(entry.agentId)
        )
        if (!victim) return
        this.#evicting.add(victim.agentId)
        this.settings.log?.('putting the least recently used agent to sleep to make room', {
          agentId: victim.agentId,
          for: head.agentId,
        })
        try {
          await this.settings.sleep(victim.agentId)
        } catch (error) {
          this.settings.log?.('could not put an agent to sleep', {
            agentId: victim.agentId,
            error: (error as Error).message,
          })
          return
        } finally {
          this.#evicting.delete(victim.agentId)
        }
        this.#admitted.delete(victim.agentId)
      }
    } finally {
      this.#pumping = false
    }
  }
}
