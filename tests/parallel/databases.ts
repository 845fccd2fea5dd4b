/**
 * A PostgreSQL database per shard of bin/test_parallel.ts, made empty at
 * the start of the run and dropped at its end: on DATABASE_URL's server
 * (`<its database>_shard<n>`) when set, else on the embedded PostgreSQL of
 * the checkout's storage (`agent_host_test_shard<n>`), which the runner
 * holds for the whole run (every shard connects to that one server).
 */
import { join } from 'node:path'
import pg from 'pg'
import { acquireEmbeddedPostgres } from '#core/database/embedded_postgres'

export interface ShardDatabases {
  /** DATABASE_URL of each shard, by shard number (1-based). */
  urls: string[]
  /** Drops them (and lets go of the embedded PostgreSQL). */
  release(): Promise<void>
}

function databaseUrl(base: URL, database: string): string {
  const url = new URL(base)
  url.pathname = `/${encodeURIComponent(database)}`
  return url.toString()
}

async function onServer<T>(url: URL, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url.toString() })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

export async function shardDatabases(options: {
  count: number
  storage: string
  log: (message: string) => void
}): Promise<ShardDatabases> {
  let base: URL
  let releaseServer = async () => {}
  if (process.env.DATABASE_URL) {
    base = new URL(process.env.DATABASE_URL)
  } else {
    const embedded = await acquireEmbeddedPostgres({
      dataDir: join(options.storage, 'postgres'),
      database: 'agent_host_test',
      log: options.log,
    })
    base = new URL(embedded.url)
    releaseServer = () => embedded.release()
  }
  const prefix = decodeURIComponent(base.pathname.slice(1)) || 'agent_host_test'
  const names = Array.from({ length: options.count }, (_, index) => `${prefix}_shard${index + 1}`)
  const drop = () =>
    onServer(base, async (client) => {
      for (const name of names) await client.query(`drop database if exists "${name}" with (force)`)
    })
  try {
    await drop()
    await onServer(base, async (client) => {
      for (const name of names) await client.query(`create database "${name}"`)
    })
  } catch (error) {
    await releaseServer()
    throw error
  }
  return {
    urls: names.map((name) => databaseUrl(base, name)),
    async release() {
      try {
        await drop()
      } finally {
        await releaseServer()
      }
    },
  }
}
