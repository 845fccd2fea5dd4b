import type { ApplicationService } from '@adonisjs/core/types'

/**
 * Applies pending migrations before the HTTP server starts (web environment
 * only), so `npm start` on a fresh clone serves a ready schema.
 */
export default class MigrationsProvider {
  constructor(protected app: ApplicationService) {}

  async start() {
    if (this.app.getEnvironment() !== 'web' || process.env.MIGRATE_ON_START === 'false') return
    const { migrateToLatest } = await import('#core/database/migrations')
    const db = await this.app.container.make('lucid.db')
    const logger = await this.app.container.make('logger')
    const applied = await migrateToLatest(this.app, db)
    if (applied.length > 0) logger.info({ applied }, 'applied %d migration(s)', applied.length)
  }
}
