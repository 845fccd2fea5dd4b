import pg from 'pg'
import type { ApplicationService } from '@adonisjs/core/types'
import type { Database } from '@adonisjs/lucid/database'
import { MigrationRunner } from '@adonisjs/lucid/migration'

/** Arbitrary constant naming this service's migration lock among advisory locks. */
const MIGRATION_LOCK_KEY = 7_412_903_311

/**
 * Applies pending migrations while holding a PostgreSQL advisory lock on a
 * dedicated connection, so instances starting together migrate one at a time
 * (the later ones find nothing pending).
 */
export async function migrateToLatest(app: ApplicationService, db: Database): Promise<string[]> {
  const lockClient = new pg.Client({ connectionString: process.env.DATABASE_URL })
  await lockClient.connect()
  try {
    await lockClient.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY])
    const migrator = new MigrationRunner(db, app, { direction: 'up', disableLocks: true })
    await migrator.run()
    if (migrator.error) throw migrator.error
    return Object.values(migrator.migratedFiles).map((entry) => entry.file.name)
  } finally {
    await lockClient.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => {})
    await lockClient.end()
  }
}

/** True when every migration file has been applied. */
export async function migrationsComplete(app: ApplicationService, db: Database): Promise<boolean> {
  const migrator = new MigrationRunner(db, app, {
    direction: 'up',
    dryRun: true,
    disableLocks: true,
  })
  const list = await migrator.getList()
  return list.every((entry) => entry.status === 'migrated')
}
