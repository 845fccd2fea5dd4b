import { execFile } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs'
import { basename } from 'node:path'
import type { SystemUser } from '#core/database/embedded/system_user'

/**
 * Start time of a process (clock ticks since boot, from /proc/<pid>/stat).
 * Together with the pid it identifies a process even when pids get reused,
 * e.g. a container restarting with the same small pid. Undefined when the
 * process is gone or is a zombie.
 */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the parenthesised command name: state is field 3, starttime field 22.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return fields[0] === 'Z' ? undefined : fields[19]
  } catch {
    return undefined
  }
}

/** "<pid>-<starttime>" of this process, written into lock and holder files. */
export function ownIdentity(): string {
  return `${process.pid}-${processStartTime(process.pid) ?? '0'}`
}

/** Whether the process named by an identity from ownIdentity() still runs. */
export function isIdentityAlive(identity: string): boolean {
  const [pid, startTime] = identity.split('-')
  return isProcessAlive(Number(pid), startTime)
}

export function isProcessAlive(pid: number, startTime?: string): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false
  if (existsSync('/proc/self/stat')) {
    const current = processStartTime(pid)
    return current !== undefined && (!startTime || startTime === '0' || current === startTime)
  }
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** argv of a process, or [] when unreadable. */
export function processCommand(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean)
  } catch {
    return []
  }
}

function processCwd(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/cwd`)
  } catch {
    return undefined
  }
}

/** Postgres processes keep their original argv[0] (postmaster) or retitle to "postgres: ...". */
function isPostgresCommand(command: string[]): boolean {
  const first = command[0] ?? ''
  return basename(first) === 'postgres' || first.startsWith('postgres:')
}

/**
 * Whether pid is a postgres server process working on dataDir. Postgres
 * chdirs into its data directory, so the cwd is the reliable check; the
 * command line (-D <dir>) is the fallback when /proc/<pid>/cwd is unreadable.
 */
export function isPostgresOf(pid: number, dataDir: string): boolean {
  if (!isProcessAlive(pid)) return false
  const command = processCommand(pid)
  if (!isPostgresCommand(command)) return false
  const realDataDir = realpathSync(dataDir)
  const cwd = processCwd(pid)
  if (cwd !== undefined) return cwd === realDataDir
  return command.includes(dataDir) || command.includes(realDataDir)
}

/** Pids of postgres processes (e.g. backends left by a killed postmaster) using dataDir. */
export function postgresProcessesOf(dataDir: string): number[] {
  if (!existsSync('/proc/self/stat')) return []
  const realDataDir = realpathSync(dataDir)
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => isPostgresCommand(processCommand(pid)) && processCwd(pid) === realDataDir)
}

/** Environment for the PostgreSQL tools: no PG* overrides, a locale that always exists. */
function toolEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { LC_ALL: 'C', LANG: 'C' }
  for (const [name, value] of Object.entries(process.env)) {
    if (name.startsWith('PG') || name.startsWith('LC_') || name === 'LANG') continue
    env[name] = value
  }
  return env
}

export interface RunOptions {
  cwd: string
  timeoutMs: number
  /** Run as this user (only when Node runs as root). */
  user?: SystemUser
}

/**
 * Runs a PostgreSQL tool to completion. Rejects with its stderr/stdout in the
 * message; `timedOut` tells a timeout apart from a failure.
 */
export function runTool(
  file: string,
  args: string[],
  options: RunOptions
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      {
        cwd: options.cwd,
        env: toolEnvironment(),
        timeout: options.timeoutMs,
        uid: options.user?.uid,
        gid: options.user?.gid,
      },
      (error, stdout, stderr) => {
        if (!error) return resolve({ stdout, stderr })
        const output = `${stderr}\n${stdout}`.trim()
        const failure = new Error(`${basename(file)} failed: ${output || error.message}`)
        Object.assign(failure, { timedOut: error.killed === true })
        reject(failure)
      }
    )
  })
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
