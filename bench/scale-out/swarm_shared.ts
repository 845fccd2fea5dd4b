/**
 * What the swarm benches of bench/scale-out share: the checks and migration
 * they need before a cluster is built, and the swarm state store on a plain
 * pg pool (the service itself uses its Lucid connection).
 */
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import pg from 'pg'
import type { StateDatabase } from '#runtime/swarm/state_store'
import { clusterUnavailable } from '../../tests/helpers/swarm_cluster.ts'

export const root = join(import.meta.dirname, '..', '..')

export const log = (message: string) => console.error(`[${new Date().toISOString()}] ${message}`)
export const secs = (ms: number) => (ms / 1000).toFixed(1)

/** Throws unless a cluster can be built here; migrates DATABASE_URL (the swarm state table). */
export async function prepareSwarmBench(): Promise<void> {
  if (!process.env.DATABASE_URL) throw new Error('DATABASE_URL names the database to use')
  const unavailable = await clusterUnavailable()
  if (unavailable) throw new Error(`no swarm cluster here: ${unavailable}`)
  const migrated = spawnSync(process.execPath, ['ace', 'migration:run', '--force'], {
    cwd: root,
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  if (migrated.status !== 0) throw new Error('migrating DATABASE_URL failed')
}

/** The swarm state store's database on a pg pool of DATABASE_URL (`?` bindings become `$n`). */
export function pgStateDatabase(): { db: StateDatabase; end: () => Promise<void> } {
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 12 })
  const db: StateDatabase = {
    async transaction(work) {
      const client = await pool.connect()
      try {
        await client.query('begin')
        const result = await work((sql, bindings) => {
          let index = 0
          return client.query(
            sql.replace(/\?/g, () => `$${++index}`),
            bindings
          )
        })
        await client.query('commit')
        return result
      } catch (error) {
        await client.query('rollback').catch(() => {})
        throw error
      } finally {
        client.release()
      }
    },
  }
  return { db, end: () => pool.end() }
}

export async function inBatches<T>(items: T[], size: number, work: (item: T) => Promise<unknown>) {
  for (let index = 0; index < items.length; index += size) {
    await Promise.all(items.slice(index, index + size).map(work))
  }
}

export const percentile = (numbers: number[], p: number) => {
  const sorted = [...numbers].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}
