import type { BootPriority } from '#runtime/capacity/capacity_manager'
import { admissionOrder, type QueuedStart } from '#runtime/capacity/boot_queue_order'

/** A start waiting to prepare its container. */
interface WaitingPreparation extends QueuedStart {
  go: () => void
}

/**
 * Starts preparing their container (the driver's create) a few at a time,
 * in the boot queue's own fair order (boot_queue_order.ts: interactive
 * first, accounts taking turns, fewer waiting first), before they join the
 * boot queue (docs/runtime.md "Preparations before the queue"). `atOnce`
 * 0 is no limit.
 */
export class PreparationQueue {
  readonly #waiting: WaitingPreparation[] = []
  /** The turn each account was last served at, while preparations wait or run. */
  readonly #served = new Map<string, number>()
  #turn = 0
  #seq = 0
  #running = 0

  constructor(private readonly atOnce: number) {}

  /** Runs `prepare` in the start's turn. */
  async run<T>(
    start: { agentId: string; owner: string; priority: BootPriority; askedAt: number },
    prepare: () => Promise<T>
  ): Promise<T> {
    if (this.atOnce <= 0) return prepare()
    await new Promise<void>((go) => {
      this.#waiting.push({ ...start, resumes: false, seq: ++this.#seq, go })
      this.#next()
    })
    try {
      return await prepare()
    } finally {
      this.#running--
      this.#next()
    }
  }

  /** Starts waiting preparations in order while places are free. */
  #next() {
    while (this.#running < this.atOnce && this.#waiting.length > 0) {
      const [head] = admissionOrder(this.#waiting, this.#served, this.#turn, false)
      this.#waiting.splice(this.#waiting.indexOf(head), 1)
      this.#served.set(head.owner, ++this.#turn)
      this.#running++
      head.go()
    }
    // Turns are remembered only while preparations wait or run, as the boot queue's are.
    if (this.#waiting.length === 0 && this.#running === 0) this.#served.clear()
  }
}
