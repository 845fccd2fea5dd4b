import { configProvider } from '@adonisjs/core'
import type { ConfigProvider } from '@adonisjs/core/types'
import { errors, type LimiterResponse } from '@adonisjs/limiter'
import type {
  LimiterConsumptionOptions,
  LimiterManagerStoreFactory,
  LimiterStoreContract,
} from '@adonisjs/limiter/types'

type StoreFactory = LimiterManagerStoreFactory | ConfigProvider<LimiterManagerStoreFactory>

export interface FailoverOptions {
  /** The store used while it is up (Redis). */
  primary: StoreFactory
  /** The store counted in while the primary is down (PostgreSQL, shared by every instance). */
  fallback: StoreFactory
  /** Whether the primary can take a command now (without waiting for it). */
  primaryReady(): boolean
  /** Called once per outage when counting moves to the fallback. */
  onFailover?(error: unknown): void
}

/**
 * A limiter store that counts in Redis and, while Redis is down, in the
 * database instead: every limit (login failures, sign-ups, daily quotas,
 * webhook and channel rates) keeps applying through an outage, and no
 * request waits for Redis. Counts made during the outage stay in the
 * database window, so a limit is at worst doubled for one window, never
 * lifted. The choice is made per call from the connection's state, so
 * counting returns to Redis as soon as it is back.
 */
export class FailoverLimiterStore implements LimiterStoreContract {
  readonly #primary: LimiterStoreContract
  readonly #fallback: LimiterStoreContract
  readonly #options: FailoverOptions

  constructor(
    primary: LimiterStoreContract,
    fallback: LimiterStoreContract,
    options: FailoverOptions
  ) {
    this.#primary = primary
    this.#fallback = fallback
    this.#options = options
  }

  get name() {
    return 'failover'
  }
  get requests() {
    return this.#primary.requests
  }
  get duration() {
    return this.#primary.duration
  }
  get blockDuration() {
    return this.#primary.blockDuration
  }

  async #run<T>(call: (store: LimiterStoreContract) => Promise<T>): Promise<T> {
    if (!this.#options.primaryReady()) return call(this.#fallback)
    try {
      return await call(this.#primary)
    } catch (error) {
      // A limit reached is an answer, not an outage.
      if (error instanceof errors.E_TOO_MANY_REQUESTS) throw error
      this.#options.onFailover?.(error)
      return call(this.#fallback)
    }
  }

  consume(key: string | number, amount?: number): Promise<LimiterResponse> {
    return this.#run((store) => store.consume(key, amount))
  }
  increment(key: string | number, amount?: number): Promise<LimiterResponse> {
    return this.#run((store) => store.increment(key, amount))
  }
  decrement(key: string | number, amount?: number): Promise<LimiterResponse> {
    return this.#run((store) => store.decrement(key, amount))
  }
  block(key: string | number, duration: string | number): Promise<LimiterResponse> {
    return this.#run((store) => store.block(key, duration))
  }
  set(key: string | number, requests: number, duration?: string | number) {
    return this.#run((store) => store.set(key, requests, duration))
  }
  async delete(key: string | number): Promise<boolean> {
    // A key may have been counted in either store: forget it in both.
    const [fromFallback, fromPrimary] = await Promise.all([
      this.#fallback.delete(key),
      this.#options.primaryReady() ? this.#primary.delete(key).catch(() => false) : false,
    ])
    return fromFallback || fromPrimary
  }
  deleteInMemoryBlockedKeys() {
    this.#primary.deleteInMemoryBlockedKeys?.()
    this.#fallback.deleteInMemoryBlockedKeys?.()
  }
  async clear(): Promise<void> {
    await this.#fallback.clear()
    if (this.#options.primaryReady()) await this.#primary.clear()
  }
  get(key: string | number): Promise<LimiterResponse | null> {
    return this.#run((store) => store.get(key))
  }
}

async function resolveFactory(
  app: Parameters<ConfigProvider<unknown>['resolver']>[0],
  factory: StoreFactory
): Promise<LimiterManagerStoreFactory> {
  return typeof factory === 'function' ? factory : factory.resolver(app)
}

/** A limiter store entry for config/limiter.ts (see FailoverLimiterStore). */
export function failoverStore(
  options: FailoverOptions
): ConfigProvider<LimiterManagerStoreFactory> {
  return configProvider.create(async (app) => {
    const primary = await resolveFactory(app, options.primary)
    const fallback = await resolveFactory(app, options.fallback)
    return (consumption: LimiterConsumptionOptions) =>
      new FailoverLimiterStore(primary(consumption), fallback(consumption), options)
  })
}
