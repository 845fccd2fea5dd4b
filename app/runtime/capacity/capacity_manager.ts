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
 * The books are this process's own unless a `book` shared by the
 * instances of the host is given (host_book.ts): then the boot slots, the
 * memory budget and the order across instances are the host's, and a
 * victim put to sleep for room may be another instance's agent.
 */
import type { BookEntry, SharedBook } from '#runtime/capacity/host_book'
import { admissionOrder, type QueuedStart } from '#runtime/capacity/boot_queue_order'

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
  /** When the start was asked for (ms): its arrival in the queue's order. Default: now. */
  askedAt?: number
}

export interface CapacitySettings {
  bootConcurrency: number
  memoryBudgetMb: number
  /** Default fair. */
  order?: BootQueueOrder
  /** Puts an admitted agent to sleep to make room; resolves once its container is stopped. */
  sleep: (agentId: string) => Promise<void>
  /** Most agents put to sleep for room at once. Default 1 (more did not win on two cores). */
  roomSleeps?: number
  log?: (message: string, detail?: Record<string, unknown>) => void
  /** The book the instances of this host share; absent: this instance's books alone. */
  book?: SharedBook
}

/** While starts wait on a shared book, how often another instance's freed room is looked for. */
const BOOK_RETRY_MS = 500

interface Admitted {
  reservedMb: number
  lastActiveAt: number
  /** Increases with every admission and message: the LRU order, even within one millisecond. */
  recency: number
  booting: boolean
}

interface Waiting extends QueuedStart {
  reservedMb: number
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
  #again = false
  #retry?: NodeJS.Timeout
  #recency = 0
  #seq = 0
  /** Increases with every admission: when each account was last served (round robin). */
  #turn = 0
  readonly #served = new Map<string, number>()
  /**
   * The admission order as last computed: kept until the queue, a priority or the turns
   * change (#reordered), since every status read asks for a place in it.
   */
  #order?: Waiting[]
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
        askedAt: options.askedAt ?? Date.now(),
        resolve,
        reject,
      })
    })
    this.#reordered()
    this.settings.book?.queue(entryOf(this.#queue.at(-1)!))
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
    this.#reordered()
    this.settings.book?.queue(entryOf(entry))
    void this.#pump()
  }

  /** A container that already runs (adopted after a service restart): counted, no boot slot. */
  adopt(agentId: string, reservedMb: number) {
    if (this.#admitted.has(agentId)) return
    this.settings.book?.adopt(agentId, reservedMb)
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
    this.settings.book?.booted(agentId)
    void this.#pump()
  }

  /** Its container stopped (stop, sleep, removal, given up): its memory is free. */
  release(agentId: string) {
    this.#wanted.delete(agentId)
    // A sleep for room whose processes ended no longer holds the next one back.
    this.#evicting.delete(agentId)
    this.settings.book?.release(agentId)
    const queued = this.#queue.findIndex((entry) => entry.agentId === agentId)
    if (queued >= 0) {
      const [entry] = this.#queue.splice(queued, 1)
      this.#reordered()
      entry.reject(new BootCancelledError())
    }
    if (this.#admitted.delete(agentId)) void this.#pump()
  }

  /** Service shutdown: every start waiting for its turn fails with BootCancelledError. */
  cancelQueued() {
    this.#wanted.clear()
    this.#reordered()
    for (const entry of this.#queue.splice(0)) {
      this.settings.book?.release(entry.agentId)
      entry.reject(new BootCancelledError())
    }
  }

  /** A message for the agent: it is the last to be put to sleep for room. */
  touch(agentId: string) {
    const entry = this.#admitted.get(agentId)
    if (!entry) return
    entry.lastActiveAt = Date.now()
    entry.recency = ++this.#recency
    this.settings.book?.touch(agentId)
  }

  isQueued(agentId: string): boolean {
    return this.#queue.some((entry) => entry.agentId === agentId)
  }

  /** Its 1-based place in the order admissions go, while it waits; else null. */
  queuePosition(agentId: string): number | null {
    if (!this.isQueued(agentId)) return null
    return this.#ordered().findIndex((entry) => entry.agentId === agentId) + 1
  }

  /** The same across the host's instances (with a shared book): theirs that go first count too. */
  async hostQueuePosition(agentId: string): Promise<number | null> {
    const place = this.queuePosition(agentId)
    const entry = this.#queue.find((waiting) => waiting.agentId === agentId)
    if (place === null || !entry || !this.settings.book) return place
    return place + (await this.settings.book.waitingAhead(entryOf(entry)))
  }

  /** The host's books (with a shared book), else this instance's. */
  async hostSnapshot(): Promise<CapacitySnapshot> {
    const { bootConcurrency, memoryBudgetMb, book } = this.settings
    return book ? book.snapshot({ bootConcurrency, memoryBudgetMb }) : this.snapshot()
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

  /** The queue in admission order (boot_queue_order.ts), from the books: the pump's order. */
  #ordered(): Waiting[] {
    this.#order ??= admissionOrder(this.#queue, this.#served, this.#turn, this.#fifo)
    return this.#order
  }

  #reordered() {
    this.#order = undefined
  }

  get #fifo(): boolean {
    return this.settings.order === 'fifo'
  }

  #take(head: Waiting) {
    this.#queue.splice(this.#queue.indexOf(head), 1)
    this.#served.set(head.owner, ++this.#turn)
    this.#reordered()
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
    if (this.#pumping) {
      // Room freed while a shared book was being asked: look again once this round ends.
      this.#again = true
      return
    }
    this.#pumping = true
    try {
      while (this.#queue.length > 0) {
        const head = this.#ordered()[0]
        // This instance's own books answer at once (nothing can change in between).
        const room = this.settings.book ? await this.#hostRoom(head) : this.#room(head)
        if (room === 'admit') {
          this.#take(head)
          continue
        }
        // A boot ahead of time never costs a running agent its container. It is the
        // head only when no interactive start waits, so it blocks nobody.
        if (head.priority === 'background' && !this.#fifo) return
        // Up to #roomBatch() sleeps under way, begun whether or not a boot slot is free (the
        // memory is then ready when one frees); each that ends pumps again.
        const wanted = Math.max(0, this.#roomBatch() - this.#evicting.size)
        const victims = room.filter((agentId) => !this.#evicting.has(agentId)).slice(0, wanted)
        for (const victim of victims) void this.#sleepForRoom(victim, head)
        return
      }
    } catch (error) {
      this.settings.log?.('boot queue: admission failed', { error: (error as Error).message })
    } finally {
      this.#pumping = false
      if (this.#again) {
        this.#again = false
        void this.#pump()
      } else this.#retryLater()
    }
  }

  /**
   * How many agents may be under way to sleep for room: one per waiting
   * start that may make room (interactive ones; any with fifo), at most
   * `roomSleeps`. Boot slots do not count: a sleep made while the slots boot
   * has the memory ready when one frees.
   */
  #roomBatch(): number {
    const waiting = this.#fifo
      ? this.#queue.length
      : this.#queue.filter((entry) => entry.priority === 'interactive').length
    const most = this.settings.roomSleeps ?? 1
    return Math.max(1, Math.min(waiting, most))
  }

  /** Puts `victim` to sleep for `head`, then admits again (a failure waits for the next event). */
  async #sleepForRoom(victim: string, head: Waiting): Promise<void> {
    this.#evicting.add(victim)
    const admitted = this.#admitted.get(victim)
    this.settings.log?.('putting the least recently used agent to sleep to make room', {
      agentId: victim,
      for: head.agentId,
    })
    try {
      await this.settings.sleep(victim)
    } catch (error) {
      this.settings.log?.('could not put an agent to sleep', {
        agentId: victim,
        error: (error as Error).message,
      })
      return
    } finally {
      this.#evicting.delete(victim)
    }
    // Its start since (a message while its checkpoint was stored) is another admission.
    if (this.#admitted.get(victim) === admitted) this.#admitted.delete(victim)
    void this.#pump()
  }

  /**
   * 'admit' when the head fits (a boot slot and its memory free; alone, an
   * agent larger than the whole budget). When its memory is not free, the
   * idle admitted agents that could be put to sleep for it, least recently
   * active first, whether or not a slot is free. Else (none to put to sleep,
   * or no slot) it waits: [].
   */
  #room(head: Waiting): 'admit' | string[] {
    const { bootConcurrency, memoryBudgetMb } = this.settings
    const { reservedMb, booting } = this.snapshot()
    if (reservedMb + head.reservedMb > memoryBudgetMb && this.#admitted.size > 0) {
      return this.admittedAgents()
        .filter((entry) => !entry.booting)
        .map((entry) => entry.agentId)
    }
    return booting >= bootConcurrency ? [] : 'admit'
  }

  /** The same from the book the host's instances share (host_book.ts). */
  async #hostRoom(head: Waiting): Promise<'admit' | string[]> {
    const { book, bootConcurrency, memoryBudgetMb } = this.settings
    const verdict = await book!.admit(entryOf(head), { bootConcurrency, memoryBudgetMb })
    return 'admitted' in verdict ? 'admit' : verdict.victims
  }

  /** Another instance of the host may free room at any time: a shared book is looked at again. */
  #retryLater() {
    if (!this.settings.book || this.#queue.length === 0 || this.#retry) return
    this.#retry = setTimeout(() => {
      this.#retry = undefined
      void this.#pump()
    }, BOOK_RETRY_MS)
    this.#retry.unref()
  }
}

/** A waiting start as the shared book knows it. */
function entryOf(entry: Waiting): BookEntry {
  return {
    agentId: entry.agentId,
    reservedMb: entry.reservedMb,
    interactive: entry.priority === 'interactive',
    resumes: entry.resumes,
  }
}
