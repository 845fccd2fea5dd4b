import { execFile, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { readdir, unlink, writeFile } from 'node:fs/promises'
import { setPriority } from 'node:os'
import { text } from 'node:stream/consumers'
import { fileURLToPath } from 'node:url'
import type { ArchiveInput, WrittenArchive } from '#backups/services/archive_writer'

/**
 * Packs an archive in a process of its own at the lowest CPU priority
 * (docs/backups.md "Consistency"): reading, hashing and compressing 100 MB
 * takes a core for a second or more, which would otherwise come from the
 * service's event loop and the agents' answers. At niceness 19 the packer
 * gets what the service (0) and the agents (10) leave: on an idle host all
 * of a core, on a busy one a backup takes longer and nobody's answers do.
 * `nice` sets it before the process starts, so every thread of it (the
 * compression pool too) inherits it, and `chrt --idle` its scheduling
 * class (SCHED_IDLE: any other task waking up takes the CPU from it at
 * once); setpriv's pdeathsig ends it with a service killed mid-backup.
 *
 * Where the kernel groups tasks by session for fairness (autogroup,
 * `/proc/sys/kernel/sched_autogroup_enabled`), niceness only orders tasks
 * within a group, and the packer's CPU would count against the service's
 * own group's share: the service would then wait behind other sessions'
 * work while the packer ran. So it runs in a session of its own, whose
 * group is given niceness 19 too (`/proc/<pid>/autogroup`).
 *
 * On a host kept busy (every core wanted by nice-0 work), a SCHED_IDLE
 * task gets next to nothing: a backup would wait for minutes or for ever.
 * So a packer still running after a while steps up (PROMOTIONS): the
 * backup takes longer on a busy host, but it ends.
 */
const PACKER_NICENESS = 19
const NICE = '/usr/bin/nice'
const SETPRIV = '/usr/bin/setpriv'
const CHRT = '/usr/bin/chrt'
/** Wall time since the packer started → the niceness it then runs at (SCHED_OTHER). */
const PROMOTIONS = [
  { afterMs: 10_000, niceness: 19 },
  { afterMs: 40_000, niceness: 10 },
  { afterMs: 100_000, niceness: 0 },
]
const here = fileURLToPath(import.meta.url)
/** The entry beside this module: `.ts` from source (run through ts-exec), `.js` in a build. */
const entry = here.replace(/archive_packer\.(ts|js)$/, 'pack_process.$1')
const loader = here.endsWith('.ts') ? ['--import', '@poppinss/ts-exec'] : []
/** The app's root: bare specifiers (the loader) resolve from its node_modules. */
const root = fileURLToPath(new URL('../../../', import.meta.url))

/**
 * `background`: niceness 19 (a backup: the agent runs on). `interactive`:
 * 0 (a restore's pre-restore backup: the agent is down and its owner
 * waits), still in a session of its own, so not on the service's account.
 */
export type PackPriority = 'background' | 'interactive'

function command(niceness: number): [string, string[]] {
  let argv = [process.execPath, ...loader, entry]
  if (existsSync(NICE)) argv = [NICE, '-n', String(niceness), ...argv]
  if (niceness > 0 && existsSync(CHRT)) argv = [CHRT, '--idle', '0', ...argv]
  if (existsSync(SETPRIV)) argv = [SETPRIV, '--pdeathsig', 'KILL', '--', ...argv]
  return [argv[0], argv.slice(1)]
}

/** Its autogroup's niceness (where there are autogroups), and its own where `nice` was missing. */
async function lowerPriority(pid: number, niceness: number): Promise<void> {
  await writeFile(`/proc/${pid}/autogroup`, String(niceness)).catch(() => undefined)
  if (existsSync(NICE)) return
  try {
    setPriority(pid, niceness)
  } catch {
    // Exited already: its exit code says why.
  }
}

/** Every thread of `pid` leaves SCHED_IDLE for `niceness` (a thread's niceness is its own on Linux). */
async function promote(pid: number, niceness: number): Promise<void> {
  if (existsSync(CHRT)) {
    await new Promise((resolve) =>
      execFile(CHRT, ['--all-tasks', '--other', '-p', '0', String(pid)], resolve)
    )
  }
  const threads = await readdir(`/proc/${pid}/task`).catch(() => [])
  for (const thread of threads) {
    try {
      setPriority(Number(thread), niceness)
    } catch {
      // Exited meanwhile.
    }
  }
  await writeFile(`/proc/${pid}/autogroup`, String(niceness)).catch(() => undefined)
}

/** Steps a background packer up while it runs (PROMOTIONS); the returned function stops that. */
export function promoteWhileRunning(pid: number, steps = PROMOTIONS): () => void {
  const timers = steps.map(({ afterMs, niceness }) =>
    setTimeout(() => void promote(pid, niceness), afterMs).unref()
  )
  return () => timers.forEach(clearTimeout)
}

/** Writes the archive of `input` to `target` (writeArchive) in the packer's process. */
export async function packApart(
  target: string,
  input: ArchiveInput,
  priority: PackPriority = 'background'
): Promise<WrittenArchive> {
  const niceness = priority === 'background' ? PACKER_NICENESS : 0
  const [file, args] = command(niceness)
  const child = spawn(file, args, {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', NODE_ENV: process.env.NODE_ENV ?? 'production' },
    stdio: ['pipe', 'pipe', 'pipe'],
    // Its own session, so its own autogroup (above).
    detached: true,
  })
  if (child.pid) await lowerPriority(child.pid, niceness)
  const stopPromoting = child.pid && niceness > 0 ? promoteWhileRunning(child.pid) : () => {}
  // Before its pid can be reused.
  child.once('exit', stopPromoting)
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', resolve)
  })
  child.stdin.on('error', () => undefined)
  child.stdin.end(JSON.stringify({ target, input }))
  const [output, errors, code] = await Promise.all([
    text(child.stdout),
    text(child.stderr),
    exited,
  ]).finally(stopPromoting)
  if (code !== 0) {
    // Killed before it could clean up after itself.
    await unlink(target).catch(() => undefined)
    throw new Error(`Packing the archive failed: ${errors.trim() || `exit code ${code}`}`)
  }
  return JSON.parse(output) as WrittenArchive
}
