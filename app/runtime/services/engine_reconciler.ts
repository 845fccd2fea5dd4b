import { hostname } from 'node:os'
import { randomUUID } from 'node:crypto'
import { claimLease, releaseLease } from '#runtime/services/runtime_lease'

export const RECONCILE_LEASE = 'engine-reconciler'

export interface EngineReconcilerOptions {
  /** Brings the engine in line with the database (start, adopt, sweep). */
  reconcile: () => Promise<unknown>
  holder?: string
  /** How long a claim lasts without renewal. Default 20 s: another instance takes over within 30 s. */
  leaseMs?: number
  /** How often the lease is claimed or renewed. Default 5 s. */
  tickMs?: number
  /** How often the holder reconciles. Default 60 s (and at once when it gains the lease). */
  reconcileEveryMs?: number
  log?: (message: string, detail?: Record<string, unknown>) => void
}

/**
 * With a shared engine (docker, swarm) several service instances see the
 * same agents: exactly one of them, the holder of a PostgreSQL lease,
 * reconciles (adopts running agents, starts missing ones, stops deleted
 * ones). It renews the lease every tick; when it dies, the lease lapses and
 * the next instance to tick takes over and reconciles at once. Starting
 * twice is ruled out below too: containers and services are named after
 * the agent, so a second create finds the first and adopts it.
 */
export class EngineReconciler {
  readonly holder: string
  #timer?: NodeJS.Timeout
  #holding = false
  #lastReconcile = 0
  #running?: Promise<void>
  #reconciling?: Promise<void>

  constructor(private readonly options: EngineReconcilerOptions) {
    this.holder = options.holder ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`
  }

  get holding() {
    return this.#holding
  }

  /** One claim-or-renew; true when a reconcile is due (just gained, or its interval passed). */
  async #claim(): Promise<boolean> {
    const held = await claimLease(RECONCILE_LEASE, this.holder, this.options.leaseMs ?? 20_000)
    const gained = held && !this.#holding
    this.#holding = held
    if (!held) return false
    if (gained) this.options.log?.('engine reconciler: lease gained', { holder: this.holder })
    return gained || Date.now() - this.#lastReconcile >= (this.options.reconcileEveryMs ?? 60_000)
  }

  #reconcile(): Promise<void> {
    this.#lastReconcile = Date.now()
    this.#reconciling ??= Promise.resolve()
      .then(() => this.options.reconcile())
      .then(() => {})
      .finally(() => (this.#reconciling = undefined))
    return this.#reconciling
  }

  /** One claim-or-renew, and a reconcile when due (awaited). */
  async tick(): Promise<void> {
    if ((await this.#claim()) && !this.#reconciling) await this.#reconcile()
  }

  start() {
    // The lease is renewed on every tick even while a long reconcile (agents
    // waiting in the boot queue) is still under way, so it never lapses under it.
    const run = () => {
      if (this.#running) return
      this.#running = this.#claim()
        .then((due) => {
          if (due && !this.#reconciling) {
            this.#reconcile().catch((error) =>
              this.options.log?.('engine reconciler: reconcile failed', { error: String(error) })
            )
          }
        })
        .catch((error) =>
          this.options.log?.('engine reconciler: tick failed', { error: String(error) })
        )
        .finally(() => (this.#running = undefined))
    }
    run()
    this.#timer = setInterval(run, this.options.tickMs ?? 5000)
    this.#timer.unref()
  }

  /** Stops ticking; `release` gives the lease up at once (a clean shutdown). */
  async stop(options: { release?: boolean } = {}) {
    clearInterval(this.#timer)
    this.#timer = undefined
    await this.#running
    await this.#reconciling?.catch(() => {})
    if (options.release && this.#holding) await releaseLease(RECONCILE_LEASE, this.holder)
    this.#holding = false
  }
}
