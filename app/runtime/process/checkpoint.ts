import { spawn, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { lstat, mkdir, readFile, readdir, readlink, rename, rm, writeFile } from 'node:fs/promises'
import { join, resolve as resolvePath } from 'node:path'
import { pageDeltaProgram, templateIdentity, writeAsDelta } from '#runtime/process/checkpoint_delta'
import { PARENT_LINK } from '#runtime/process/template_pages'

/**
 * Checkpoint and restore of a sleeping agent's processes with CRIU
 * (docs/runtime.md "Sleep and wake"). A sleep writes the framework's whole
 * process tree (memory, open files, listening socket) to the agent's
 * `runtime/checkpoint/` folder and ends it: it holds no memory. A wake
 * restores it there in about a second instead of booting the framework
 * again (an OpenClaw gateway boots in ~20 s of CPU).
 *
 * Only the root layout of the sandbox (app/runtime/process/sandbox.ts) can
 * be checkpointed: a mount namespace on a root folder of the agent's own,
 * no user namespace, output opened inside, no io_uring (seccomp). Anything
 * CRIU refuses falls back to a plain stop and a cold boot; the agent never
 * depends on its checkpoint.
 *
 * CRIU is found as `AGENT_CRIU`, else `criu` in /usr/local/sbin, /usr/sbin or
 * /usr/local/bin, and must be 4.2 or newer (older ones cannot read socket
 * options of newer kernels); scripts/install-criu.sh builds it from Debian's
 * source. `AGENT_CHECKPOINT=off` turns checkpoints off (the process driver's
 * `checkpoints` option).
 */

/** What a checkpoint was taken of: a wake restores it only into the same launch. */
export interface CheckpointMeta {
  /** Hash of the launch, its environment and its rendered files (launchFingerprint). */
  fingerprint: string
  framework: string
  port: number
  /** Bytes on disk. */
  bytes: number
  /** Its memory images are zstd-compressed (unpack() before a restore). */
  compressed: boolean
  createdAt: string
  /** A delta on template images (checkpoint_delta.ts): theirs as they were then. */
  templateIdentity?: string
}

/** What a dump is asked (AgentCheckpoint.dump). */
export interface DumpOptions {
  pid: number
  uid: number
  /** Runs CRIU in the agent's network namespace (CRIU then leaves that namespace out). */
  enter?: (launch: { command: string; args: string[] }) => { command: string; args: string[] }
  meta: Omit<CheckpointMeta, 'bytes' | 'createdAt' | 'compressed'>
  /** The fixed layout's binds, recorded by name. */
  mounts?: NamedMount[]
  /** Leave the memory images uncompressed (a template is restored many times). */
  uncompressed?: boolean
  timeoutMs?: number
}

/** A dump on disk whose processes have ended, not yet the agent's checkpoint. */
export interface DumpedCheckpoint {
  /** Makes it the checkpoint a wake restores; with how long each step took, for the log. */
  store(): Promise<{ meta: CheckpointMeta; took: string }>
}

const CANDIDATES = ['/usr/local/sbin/criu', '/usr/sbin/criu', '/usr/local/bin/criu']
const ZSTD = ['/usr/bin/zstd', '/usr/local/bin/zstd'].find((path) => existsSync(path))

/** True when checkpoints are stored compressed (the zstd command is installed). */
export const compressesCheckpoints = ZSTD !== undefined
const MINIMUM = [4, 2]

let found: { path?: string; reason?: string } | undefined

/** The usable CRIU binary, or why there is none (said once in the service's log). */
export function criu(): { path?: string; reason?: string } {
  if (found) return found
  if (process.getuid?.() !== 0) return (found = { reason: 'the service does not run as root' })
  const path = process.env.AGENT_CRIU || CANDIDATES.find((candidate) => existsSync(candidate))
  if (!path) return (found = { reason: 'CRIU is not installed (scripts/install-criu.sh)' })
  const probe = spawnSync(path, ['--version'], { encoding: 'utf8', timeout: 10_000 })
  const version = /Version:\s*(\d+)\.(\d+)/.exec(probe.stdout ?? '')
  if (!version) return (found = { reason: `${path} --version did not answer` })
  const [major, minor] = [Number(version[1]), Number(version[2])]
  if (major < MINIMUM[0] || (major === MINIMUM[0] && minor < MINIMUM[1])) {
    return (found = { reason: `${path} is CRIU ${major}.${minor}; 4.2 or newer is needed` })
  }
  return (found = { path })
}

/**
 * Options of both directions. The listening socket comes back; connections
 * open at the time come back closed (their peers reconnect). Mounts from the
 * host (the agent's folders, /usr, the framework) are bound again by path.
 * Cgroups are left alone: the restore runs inside the agent's own groups,
 * which its processes inherit.
 */
const COMMON = [
  '--shell-job',
  '--tcp-close',
  '--file-locks',
  '--ext-mount-map',
  'auto',
  '--enable-external-sharing',
  '--enable-external-masters',
  '--manage-cgroups=ignore',
]

/**
 * CRIU runs as root with the agent's real uid: the kernel lets it read and
 * set the agent's resource limits through that alone, where a host (a
 * container, this machine) withholds CAP_SYS_RESOURCE from root.
 */
/** A bind of the fixed layout (app/runtime/process/sandbox.ts fixedMounts). */
export interface NamedMount {
  name: string
  inside: string
  host: string
}

/** At a dump: each named bind is recorded by its name instead of its host path. */
function dumpMounts(mounts: NamedMount[] = []): string[] {
  return mounts.flatMap(({ name, inside }) => ['--external', `mnt[${inside}]:${name}`])
}

/** At a restore: each name is bound from the restoring agent's own host path. */
export function restoreMounts(mounts: NamedMount[] = []): string[] {
  return mounts.flatMap(({ name, host }) => ['--external', `mnt[${name}]:${host}`])
}

function asAgent(uid: number, command: string, args: string[]) {
  return {
    command: '/usr/bin/setpriv',
    args: [`--ruid=${uid}`, `--rgid=${uid}`, '--keep-groups', command, ...args],
  }
}

async function folderBytes(dir: string): Promise<number> {
  let total = 0
  for (const name of await readdir(dir)) {
    // lstat: a delta's `parent` link counts as itself, not as the template's folder.
    const info = await lstat(join(dir, name))
    total += info.size
  }
  return total
}

/** `AGENT_CHECKPOINT_DELTA=off`: checkpoints stay whole (bench:density's baseline). */
const DELTAS = process.env.AGENT_CHECKPOINT_DELTA !== 'off'

export class AgentCheckpoint {
  readonly metaFile: string

  /**
   * `templateCopy`: the agent's template copy, whose parent a dump is a delta
   * on; `compiledDir`: where the delta's page comparison is compiled.
   */
  constructor(
    readonly dir: string,
    private readonly templateCopy?: string,
    private readonly compiledDir?: string
  ) {
    this.metaFile = join(dir, 'checkpoint.json')
  }

  /** The template images the agent started from, while they are there. */
  async #template(): Promise<string | undefined> {
    if (!DELTAS || !this.templateCopy) return undefined
    const link = await readlink(join(this.templateCopy, PARENT_LINK)).catch(() => undefined)
    return link === undefined ? undefined : resolvePath(this.templateCopy, link)
  }

  /**
   * The dump in `dir` as a delta on the agent's template, where it has one:
   * the template's identity, or why the dump stays whole (said in the log).
   */
  async #asDelta(dir: string): Promise<{ identity?: string; failed?: string }> {
    const template = await this.#template()
    if (!template || !this.compiledDir) return {}
    const program = pageDeltaProgram(this.compiledDir)
    if ('reason' in program) return { failed: `no page comparison: ${program.reason}` }
    try {
      const delta = await writeAsDelta(dir, template, program.path)
      return { identity: delta?.templateIdentity }
    } catch (error) {
      return { failed: (error as Error).message }
    }
  }

  /** False when it is a delta on template images rebuilt or removed since (never restored then). */
  async templateIntact(meta: CheckpointMeta): Promise<boolean> {
    if (!meta.templateIdentity) return true
    const link = await readlink(join(this.dir, PARENT_LINK)).catch(() => undefined)
    if (link === undefined) return false
    const identity = await templateIdentity(resolvePath(this.dir, link)).catch(() => undefined)
    return identity === meta.templateIdentity
  }

  async meta(): Promise<CheckpointMeta | undefined> {
    try {
      return JSON.parse(await readFile(this.metaFile, 'utf8')) as CheckpointMeta
    } catch {
      return undefined
    }
  }

  /** Deletes it, with what a dump or restore cut short (a kill of the service) left beside it. */
  async discard(): Promise<void> {
    for (const dir of [this.dir, `${this.dir}.restored`, `${this.dir}.partial`]) {
      await rm(dir, { recursive: true, force: true })
    }
  }

  /**
   * After a restore: the images must never be restored twice (the agent's
   * state moves on). Moved aside at once (CRIU may still read them through
   * its open folder for a moment) and deleted a minute later.
   */
  async consume(): Promise<void> {
    const used = `${this.dir}.restored`
    await rm(used, { recursive: true, force: true })
    await rename(this.dir, used).catch(() => undefined)
    setTimeout(() => void rm(used, { recursive: true, force: true }), 60_000).unref()
  }

  /**
   * Writes the process tree rooted at `pid` to disk and ends it. Resolves
   * with the dump, to be stored (DumpedCheckpoint.store), or with CRIU's
   * reason when it could not (the tree then still runs, untouched).
   */
  async dump(options: DumpOptions): Promise<{ dumped?: DumpedCheckpoint; error?: string }> {
    const began = Date.now()
    const binary = criu().path
    if (!binary) return { error: criu().reason }
    const partial = `${this.dir}.partial`
    await this.discard()
    await mkdir(partial, { recursive: true, mode: 0o700 })
    const dump = asAgent(options.uid, binary, [
      'dump',
      ...['-t', String(options.pid), '-D', partial, '-o', 'dump.log', '-v1'],
      ...COMMON,
      ...dumpMounts(options.mounts),
    ])
    const run = options.enter?.(dump) ?? dump
    const code = await exitCode(run.command, run.args, options.timeoutMs ?? 60_000)
    if (code !== 0) {
      const error = await lastErrors(join(partial, 'dump.log'))
      await rm(partial, { recursive: true, force: true })
      return { error: `criu dump exited with ${code}: ${error}` }
    }
    const dumpedIn = Date.now() - began
    // A store that failed (a full disk) leaves no raw dump of a gigabyte behind.
    const store = () =>
      this.#store(partial, options, dumpedIn).catch(async (error) => {
        await rm(partial, { recursive: true, force: true })
        throw error
      })
    return { dumped: { store } }
  }

  /**
   * The dump in `partial` made the checkpoint: a delta on the agent's
   * template (only the pages not the template's are kept), compressed, then
   * moved in place with its meta. The processes ended with the dump, so a
   * sleep frees its memory before this (docs/runtime.md "Sleep and wake").
   */
  async #store(
    partial: string,
    options: DumpOptions,
    dumpedIn: number
  ): Promise<{ meta: CheckpointMeta; took: string }> {
    const began = Date.now()
    const { identity, failed } = options.uncompressed ? {} : await this.#asDelta(partial)
    const compared = Date.now()
    // Left uncompressed when zstd fails: a larger checkpoint is still one.
    const packError = options.uncompressed
      ? 'not asked'
      : await this.#zstd(partial, ['-1', '-T0'], '.img')
    const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`
    const took =
      `dumped in ${secs(dumpedIn)}` +
      (identity ? `, made a delta on its template in ${secs(compared - began)}` : '') +
      (failed ? `, kept whole (no delta: ${failed})` : '') +
      `, compressed in ${secs(Date.now() - compared)}`
    const meta: CheckpointMeta = {
      ...options.meta,
      compressed: ZSTD !== undefined && !packError,
      bytes: await folderBytes(partial),
      createdAt: new Date().toISOString(),
      ...(identity ? { templateIdentity: identity } : {}),
    }
    await writeFile(join(partial, 'checkpoint.json'), `${JSON.stringify(meta)}\n`, { mode: 0o600 })
    await rename(partial, this.dir)
    return { meta, took }
  }

  /**
   * Decompresses the memory images for CRIU, which reads them as they were
   * written. Resolves with an error message when it could not.
   */
  unpack(): Promise<string | undefined> {
    return this.#zstd(this.dir, ['-d'], '.img.zst')
  }

  /**
   * zstd (the command, at nice 10) over the folder's memory images ending in
   * `suffix`, replacing each. Compression: level 1 takes an OpenClaw
   * gateway's 1.1 GB to about 210 MB in ~1 s, and back in ~1 s; the zstd
   * command was 2.4x faster at it than Node's zlib streams here. Without it
   * checkpoints stay uncompressed. Resolves with an error message, if any.
   */
  async #zstd(dir: string, flags: string[], suffix: string): Promise<string | undefined> {
    const entries = await readdir(dir)
    const names = entries.filter((name) => name.startsWith('pages-') && name.endsWith(suffix))
    if (names.length === 0) return undefined
    if (!ZSTD) return suffix === '.img' ? undefined : 'zstd is not installed'
    const code = await exitCode(
      '/usr/bin/nice',
      ['-n', '10', ZSTD, ...flags, '-q', '-f', '--rm', ...names.map((name) => join(dir, name))],
      120_000
    )
    return code === 0 ? undefined : `zstd exited with ${code}`
  }

  /** CRIU's own account of a failed restore. */
  restoreErrors(): Promise<string> {
    return lastErrors(join(this.dir, 'restore.log'))
  }
}

/** The CRIU command that restores the images in `dir` and stays their parent. */
export function restoreCommand(
  dir: string,
  options: { uid: number; rootDir: string; pidFile: string; mounts?: NamedMount[] }
) {
  const binary = criu().path!
  return asAgent(options.uid, binary, [
    'restore',
    ...['-D', dir, '-o', 'restore.log', '-v1'],
    ...['--root', options.rootDir, '--pidfile', options.pidFile],
    ...COMMON,
    ...restoreMounts(options.mounts),
  ])
}

function exitCode(command: string, args: string[], timeoutMs: number): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: 'ignore' })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.once('error', () => resolve(null))
    child.once('exit', (code) => {
      clearTimeout(timer)
      resolve(code)
    })
  })
}

/** CRIU's error lines, short, for the agent's log. */
export async function lastErrors(logFile: string): Promise<string> {
  try {
    const text = await readFile(logFile, 'utf8')
    const lines = text.split('\n')
    const errors = lines.filter((line) => /Error|BUG/.test(line) && !/RLIMIT_NOFILE/.test(line))
    // The first error says what failed; the last ones what it led to.
    const picked = errors.length > 3 ? [errors[0], ...errors.slice(-2)] : errors
    return (picked.length ? picked : lines.filter(Boolean).slice(-3)).join(' | ').slice(0, 600)
  } catch {
    return 'no log'
  }
}
