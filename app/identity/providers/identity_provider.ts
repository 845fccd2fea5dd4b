import type { ApplicationService } from '@adonisjs/core/types'
import env from '#start/env'
import type { PostgreConfig } from '@adonisjs/lucid/types/database'
import { AuthCacheListener } from '#identity/services/auth_cache_listener'

/** The Lucid connection the limiter's database store writes its counters through. */
export const RATE_LIMITS_CONNECTION = 'rate_limits'

/**
 * - Registers the `rate_limits` database connection: the primary database
 *   with `synchronous_commit = off`, so a counter increment (one per /api/v1
 *   request) does not wait for a WAL flush. A crash can forget the last
 *   fraction of a second of counts; nothing else is written through it.
 * - Starts the invalidation listener of the auth cache in processes that
 *   serve requests (the server, the test runner); ace commands run without
 *   the cache.
 */
export default class IdentityProvider {
  #listener?: AuthCacheListener

  constructor(protected app: ApplicationService) {}

  async boot() {
    const db = await this.app.container.make('lucid.db')
    const primary = db.manager.get(db.primaryConnectionName)?.config as PostgreConfig | undefined
    if (!primary || db.manager.has(RATE_LIMITS_CONNECTION)) return
    const connection = typeof primary.connection === 'object' ? primary.connection : {}
    db.manager.add(RATE_LIMITS_CONNECTION, {
      ...primary,
      connection: { ...connection, options: '-c synchronous_commit=off' },
      pool: { min: 0, max: 10 },
      migrations: undefined,
    } as PostgreConfig)
  }

  async start() {
    if (!['web', 'test'].includes(this.app.getEnvironment())) return
    const logger = await this.app.container.make('logger')
    this.#listener = new AuthCacheListener(env.get('DATABASE_URL') ?? '', (message, error) =>
      logger.warn({ err: error }, message)
    )
    await this.#listener.start()
  }

  async shutdown() {
    await this.#listener?.stop()
  }
}
