/**
 * Admission of agent containers on this host: at most `bootConcurrency`
 * boot at once, and the memory all admitted agents reserve (each its
 * plugin's memory limit, so the host never overcommits) stays within
 * `memoryBudgetMb`. A start that does not fit first puts the least
 * recently used idle agent to sleep (through `sleep`); when nothing can be
 * put to sleep it waits in the queue, in order, and is reported `queued`.
 * Nothing is refused: a start waits until it fits.
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

export interface CapacitySettings {
  bootConcurrency: number
  memoryBudgetMb: number
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
  reservedMb: number
  /** Its start resumes a checkpoint rather than boots. */
  resumes: boolean
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
}

export class CapacityManager {
  readonly #admitted = new Map<string, Admitted>()
  readonly #queue: Waiting[] = []
  /** Agents being put to sleep to make room (not chosen twice). */
  readonly #evicting = new Set<string>()
  #pumping = false
  #recency = 0

  constructor(private readonly settings: CapacitySettings) {}

  get bootConcurrency() {
    return this.settings.bootConcurrency
  }

  /**
   * Resolves when the agent may boot: a boot slot and its memory are its
   * until `booted()` (slot) and `release()` (memory). An agent already
   * admitted resolves at once.
   */
  admit(agentId: string, reservedMb: number, options: { resumes?: boolean } = {}): Promise<void> {
    if (this.#admitted.has(agentId)) return Promise.resolve()
    const queued = this.#queue.find((entry) => entry.agentId === agentId)
    if (queued) {
      return new Promise((resolve, reject) => {
        const { resolve: first, reject: firstReject } = queued
        queued.resolve = () => (first(), resolve())
        queued.reject = (error) => (firstReject(error), reject(error))
      })
    }
    const admission = new Promise<void>((resolve, reject) => {
      const entry = { agentId, reservedMb, resumes: options.resumes === true, resolve, reject }
      // A wake that restores a checkpoint takes ~1 s of CPU where a boot takes ~12 s, and a
      // message waits on it: it goes before the boots, after the wakes already waiting.
      const firstBoot = entry.resumes ? this.#queue.findIndex((waiting) => !waiting.resumes) : -1
      if (firstBoot >= 0) this.#queue.splice(firstBoot, 0, entry)
      else this.#queue.push(entry)
    })
    void this.#pump()
    return admission
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
    const queued = this.#queue.findIndex((entry) => entry.agentId === agentId)
    if (queued >= 0) {
      const [entry] = this.#queue.splice(queued, 1)
      entry.reject(new BootCancelledError())
    }
    if (this.#admitted.delete(agentId)) void this.#pump()
  }

  /** Service shutdown: every start waiting for its turn fails with BootCancelledError. */
  cancelQueued() {
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
    }
  }

  /** Admits from the head of the queue while it fits; makes room by putting idle agents to sleep. */
  async #pump(): Promise<void> {
    if (this.#pumping) return
    this.#pumping = true
    try {
      while (this.#queue.length > 0) {
        const head = this.#queue[0]
        const { reservedMb, booting } = this.snapshot()
        if (booting >= this.settings.bootConcurrency) return
        const fits = reservedMb + head.reservedMb <= this.settings.memoryBudgetMb
        // An agent larger than the whole budget still runs alone rather than never.
        const alone = this.#admitted.size === 0
        if (fits || alone) {
          this.#queue.shift()
          this.#admitted.set(head.agentId, {
            reservedMb: head.reservedMb,
            lastActiveAt: Date.now(),
            recency: ++this.#recency,
            booting: true,
          })
          head.resolve()
          continue
        }
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
