import app from '@adonisjs/core/services/app'
import db from '@adonisjs/lucid/services/db'
import { migrationsComplete } from '#core/database/migrations'

export interface HealthReport {
  healthy: boolean
  database: 'ok' | 'unreachable'
  migrations: 'applied' | 'pending' | 'unknown'
  uptimeSecs: number
}

const startedAt = Date.now()

/**
 * Answers whether the service can serve: the database answers and every
 * migration is applied. Once migrations are seen complete that fact is kept
 * (they never go back to pending while the process runs).
 */
export class HealthService {
  #migrationsApplied = false

  async check(): Promise<HealthReport> {
    const uptimeSecs = Math.floor((Date.now() - startedAt) / 1000)
    try {
      await db.rawQuery('select 1')
    } catch {
      return { healthy: false, database: 'unreachable', migrations: 'unknown', uptimeSecs }
    }

    if (!this.#migrationsApplied) {
      this.#migrationsApplied = await migrationsComplete(app, db)
    }
    const migrations = this.#migrationsApplied ? 'applied' : 'pending'
    return { healthy: this.#migrationsApplied, database: 'ok', migrations, uptimeSecs }
  }
}

export default new HealthService()
