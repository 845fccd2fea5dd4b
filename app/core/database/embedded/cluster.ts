import { randomBytes } from 'node:crypto'
import {
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { createServer } from 'node:net'
import { basename, dirname, join } from 'node:path'
import pg from 'pg'
import type { Binaries } from '#core/database/embedded/binaries'
import {
  isPostgresOf,
  postgresProcessesOf,
  runTool,
  sleep,
} from '#core/database/embedded/processes'
import { chownTree, type SystemUser } from '#core/database/embedded/system_user'

/** First port tried; the next free one above it is used when it is taken. */
export const PREFERRED_PORT = 54329
const PORT_ATTEMPTS = 100
const START_TIMEOUT_S = 30
const STOP_TIMEOUT_S = 30
const INITDB_TIMEOUT_MS = 120_000
const LEFTOVER_WAIT_MS = 10_000
const LOG_ROTATE_BYTES = 10 * 1024 * 1024
const SUPERUSER = 'postgres'

/** A data folder and the files kept beside it (password, log, lock, holders). */
export interface Cluster {
  dataDir: string
  passwordFile: string
  logFile: string
  lockFile: string
  holdersDir: string
  binaries: Binaries
  /** Set when Node runs as root: the user PostgreSQL runs as. */
  user?: SystemUser
  log: (message: string) => void
}

export interface Postmaster {
  pid: number
  port: number
}

export function describeCluster(
  dataDir: string,
  binaries: Binaries,
  user: SystemUser | undefined,
  log: (message: string) => void
): Cluster {
  return {
    dataDir,
    passwordFile: `${dataDir}.password`,
    logFile: `${dataDir}.log`,
    lockFile: `${dataDir}.lock`,
    holdersDir: `${dataDir}.holders`,
    binaries,
    user,
    log,
  }
}

export function connectionUrl(port: number, password: string, database: string): string {
  const credentials = `${SUPERUSER}:${encodeURIComponent(password)}`
  return `postgres://${credentials}@127.0.0.1:${port}/${encodeURIComponent(database)}`
}

function giveToServerUser(cluster: Cluster, path: string): void {
  if (cluster.user) chownSync(path, cluster.user.uid, cluster.user.gid)
}

/** Runs initdb on first use; returns the superuser password. Call under the lock. */
export async function ensureInitialised(cluster: Cluster): Promise<string> {
  const initialised = existsSync(join(cluster.dataDir, 'PG_VERSION'))
  const password = ensurePassword(cluster, initialised)
  if (!initialised) {
    await initdb(cluster)
  } else if (cluster.user && statSync(cluster.dataDir).uid !== cluster.user.uid) {
    chownTree(cluster.dataDir, cluster.user)
    cluster.log(`changed the owner of ${cluster.dataDir} to ${cluster.user.name}`)
  }
  return password
}

/** The password is generated once, before initdb, and never logged. */
function ensurePassword(cluster: Cluster, initialised: boolean): string {
  if (existsSync(cluster.passwordFile)) {
    return readFileSync(cluster.passwordFile, 'utf8').trim()
  }
  if (initialised) {
    throw new Error(
      `${cluster.passwordFile} is missing but ${cluster.dataDir} holds a PostgreSQL cluster; ` +
        'restore the file, or delete the folder to start with an empty database'
    )
  }
  const password = randomBytes(24).toString('hex')
  writeFileSync(cluster.passwordFile, password, { mode: 0o600, flag: 'wx' })
  // initdb reads it as the server user; root can read it regardless.
  giveToServerUser(cluster, cluster.passwordFile)
  return password
}

/**
 * initdb into a staging folder renamed into place when complete, so an
 * interrupted first start never leaves a half-initialised data folder.
 */
async function initdb(cluster: Cluster): Promise<void> {
  const { dataDir } = cluster
  if (existsSync(dataDir) && readdirSync(dataDir).length > 0) {
    throw new Error(`${dataDir} is not empty but holds no PostgreSQL cluster (no PG_VERSION)`)
  }
  removeStagingFolders(dataDir)
  const staging = `${dataDir}.init-${process.pid}`
  mkdirSync(staging, { mode: 0o700 })
  giveToServerUser(cluster, staging)
  const args = [
    ...['--pgdata', staging, '--username', SUPERUSER, '--pwfile', cluster.passwordFile],
    ...['--auth', 'scram-sha-256', '--encoding', 'UTF8', '--locale', 'C'],
    ...['--no-sync', '--no-instructions'],
  ]
  try {
    await runTool(cluster.binaries.initdb, args, {
      cwd: dirname(dataDir),
      timeoutMs: INITDB_TIMEOUT_MS,
      user: cluster.user,
    })
  } catch (error) {
    rmSync(staging, { recursive: true, force: true })
    throw new Error(`initdb for the embedded PostgreSQL failed: ${(error as Error).message}`)
  }
  rmSync(dataDir, { recursive: true, force: true })
  renameSync(staging, dataDir)
  cluster.log(`initialised embedded PostgreSQL data in ${dataDir}`)
}

/** Staging folders left by an initdb that was killed (we hold the lock, so none is live). */
function removeStagingFolders(dataDir: string): void {
  const prefix = `${basename(dataDir)}.init-`
  for (const name of readdirSync(dirname(dataDir))) {
    if (name.startsWith(prefix)) rmSync(join(dirname(dataDir), name), { recursive: true })
  }
}

interface PidFile {
  pid: number
  port: number
  status: string
}

/** postmaster.pid: line 1 pid, line 4 port, line 8 status (starting/ready/stopping). */
function readPidFile(dataDir: string): PidFile | undefined {
  let lines: string[]
  try {
    lines = readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')
  } catch {
    return undefined
  }
  return {
    pid: Number(lines[0]),
    port: Number(lines[3]),
    status: (lines[7] ?? '').trim(),
  }
}

/**
 * The postmaster serving this data folder, whoever started it, once it is
 * ready; undefined when none runs. A postmaster.pid whose pid is dead or is
 * not a postgres process on this folder is removed.
 */
export async function runningPostmaster(cluster: Cluster): Promise<Postmaster | undefined> {
  const deadline = Date.now() + START_TIMEOUT_S * 1000
  for (;;) {
    const pidFile = readPidFile(cluster.dataDir)
    if (!pidFile) return undefined
    if (!isPostgresOf(pidFile.pid, cluster.dataDir)) {
      await removeStalePidFile(cluster, pidFile.pid)
      return undefined
    }
    if (pidFile.status === 'ready' && pidFile.port > 0) {
      return { pid: pidFile.pid, port: pidFile.port }
    }
    // Starting (e.g. crash recovery) or shutting down: wait until it settles.
    if (Date.now() > deadline) {
      throw new Error(
        `embedded PostgreSQL (pid ${pidFile.pid}) neither became ready nor stopped ` +
          `within ${START_TIMEOUT_S} s; see ${cluster.logFile}`
      )
    }
    await sleep(100)
  }
}

/**
 * Backends of a killed postmaster linger for a moment and still use the
 * shared memory; wait for them before removing the pid file that guards it.
 */
async function removeStalePidFile(cluster: Cluster, pid: number) {
  const deadline = Date.now() + LEFTOVER_WAIT_MS
  let leftovers = postgresProcessesOf(cluster.dataDir)
  while (leftovers.length > 0) {
    if (Date.now() > deadline) {
      throw new Error(
        `leftover PostgreSQL processes (pids ${leftovers.join(', ')}) still use ` +
          `${cluster.dataDir} although its postmaster is gone; stop them and retry`
      )
    }
    await sleep(100)
    leftovers = postgresProcessesOf(cluster.dataDir)
  }
  rmSync(join(cluster.dataDir, 'postmaster.pid'), { force: true })
  cluster.log(`removed stale postmaster.pid of embedded PostgreSQL (pid ${pid} is not running it)`)
}

export function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => {
      server.close(() => resolve(true))
    })
  })
}

export async function findFreePort(preferred: number): Promise<number> {
  for (let port = preferred; port < preferred + PORT_ATTEMPTS; port++) {
    if (await isPortFree(port)) return port
  }
  throw new Error(`no free port for embedded PostgreSQL in ${preferred}-${preferred + 99}`)
}

/** Appended to by every start; rotated once so it cannot grow without bound. */
function prepareLogFile(cluster: Cluster): void {
  const { logFile } = cluster
  if (existsSync(logFile) && statSync(logFile).size > LOG_ROTATE_BYTES) {
    renameSync(logFile, `${logFile}.1`)
  }
  writeFileSync(logFile, '', { flag: 'a', mode: 0o640 })
  giveToServerUser(cluster, logFile)
}

/**
 * Starts the postmaster detached (pg_ctl puts it in its own session), so it
 * outlives this process and ignores the terminal's Ctrl-C; release() stops it.
 * TCP on 127.0.0.1 only, no unix socket, so no system socket folder is needed.
 */
export async function startPostmaster(cluster: Cluster, port: number): Promise<Postmaster> {
  prepareLogFile(cluster)
  const serverOptions = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''`
  const args = [
    ...['start', '--pgdata', cluster.dataDir, '--log', cluster.logFile, '--silent'],
    ...['--wait', '--timeout', String(START_TIMEOUT_S), '--options', serverOptions],
  ]
  try {
    await runTool(cluster.binaries.pgCtl, args, {
      cwd: dirname(cluster.dataDir),
      timeoutMs: (START_TIMEOUT_S + 10) * 1000,
      user: cluster.user,
    })
  } catch (error) {
    const { message, timedOut } = error as Error & { timedOut?: boolean }
    const what = timedOut || message.includes('in time') ? ` within ${START_TIMEOUT_S} s` : ''
    throw new Error(
      `embedded PostgreSQL did not start on 127.0.0.1:${port}${what}; ` +
        `see ${cluster.logFile} (${message})`
    )
  }
  const pidFile = readPidFile(cluster.dataDir)
  if (!pidFile || pidFile.status !== 'ready') {
    throw new Error(`embedded PostgreSQL exited right after starting; see ${cluster.logFile}`)
  }
  return { pid: pidFile.pid, port: pidFile.port }
}

export async function stopPostmaster(cluster: Cluster): Promise<void> {
  const args = [
    ...['stop', '--pgdata', cluster.dataDir, '--mode', 'fast', '--silent'],
    ...['--wait', '--timeout', String(STOP_TIMEOUT_S)],
  ]
  try {
    await runTool(cluster.binaries.pgCtl, args, {
      cwd: dirname(cluster.dataDir),
      timeoutMs: (STOP_TIMEOUT_S + 10) * 1000,
      user: cluster.user,
    })
  } catch (error) {
    throw new Error(
      `embedded PostgreSQL did not stop (waited up to ${STOP_TIMEOUT_S} s); ` +
        `see ${cluster.logFile} (${(error as Error).message})`
    )
  }
}

export async function ensureDatabase(port: number, password: string, database: string) {
  const client = new pg.Client({
    host: '127.0.0.1',
    port,
    user: SUPERUSER,
    password,
    database: 'postgres',
    connectionTimeoutMillis: 10_000,
  })
  await client.connect()
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database])
    if (found.rowCount === 0) {
      await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`)
    }
  } finally {
    await client.end()
  }
}
