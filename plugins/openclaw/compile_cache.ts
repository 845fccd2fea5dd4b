import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { chmod, lstat, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises'
import type { AgentFolders } from '#plugins/types'
import { publishOnce, stagingName } from '#core/files/atomic_file'
import { acquireInstallLock } from '#runtime/install_lock'
import { inFolderBelow, symlinkBelow } from '#runtime/files/confined_dir'
import { allocatePort } from '#runtime/process/ports'
import { dirname, join, relative } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * A warm V8 compile cache for OpenClaw, made once per framework and Node.js
 * version and seeded into each agent (docs/runtime.md "Compile cache").
 *
 * OpenClaw's launcher turns on Node's compile cache itself, in
 * `$TMPDIR/node-compile-cache/openclaw/<version>/<install marker>/`, and
 * Node adds a folder per Node version, V8 flags and user id inside
 * (`v24.21.0-x64-<hash>-<uid>`). An agent's TMPDIR is its own folder, so
 * each agent compiled the whole gateway on its first boot. (Pointing
 * NODE_COMPILE_CACHE at a shared folder does not work: the launcher then
 * respawns itself, a second Node process per agent.)
 *
 * So the service boots one gateway as itself after the install, in a
 * throwaway folder, and keeps what Node wrote (about 6,000 files, 39 MB for
 * OpenClaw 2026.9.6), readable by all, writable by the service only. Before
 * an agent's first boot, each of Node's folders in its cache is made a
 * symbolic link to the shared one (named for the agent's uid). The agent
 * reads it through its sandbox's read-only mount of the runtime cache; Node
 * cannot add to it (it skips writing when the folder refuses, measured:
 * exit unchanged), so no agent ever writes what another reads. Links, not a
 * copy: copying the 6,000 files took 7 s of wall time here, more than the
 * compile time saved. An agent that has a cache of its own (it ran before)
 * keeps it.
 */

/** `<compile caches>/openclaw@<version>/node<version>`: Node's folders inside. */
export function sharedCacheDir(cacheDir: string, version: string): string {
  return join(cacheDir, `openclaw@${version}`, `node${process.versions.node}`)
}

const warming = new Map<string, Promise<string | undefined>>()

export interface WarmOptions {
  nodeExecutable: string
  packageDir: string
  version: string
  /** Where shared compile caches live (`<runtime cache>/compile-cache`). */
  cacheDir: string
  /** openclaw.json for a gateway on `port` with state in `state`. */
  renderConfig: (port: number, state: string, workspace: string) => string
  /** The gateway's variables besides the folders (token, switches). */
  environment: (state: string, workspace: string, token: string) => Record<string, string>
  log: (message: string) => void
  timeoutMs?: number
}

/**
 * The shared warm cache folder, made on first call (one gateway boot, about
 * 20-80 s here); undefined when warming failed (agents then compile on their
 * own, as before). Concurrent callers wait for one run.
 */
export function warmCompileCache(options: WarmOptions): Promise<string | undefined> {
  const dir = sharedCacheDir(options.cacheDir, options.version)
  if (existsSync(join(dir, 'node-compile-cache'))) return Promise.resolve(dir)
  let run = warming.get(dir)
  if (!run) {
    run = warm(dir, options)
      .catch((error) => {
        options.log(`compile cache not warmed: ${(error as Error).message}`)
        return undefined
      })
      .finally(() => warming.delete(dir))
    warming.set(dir, run)
  }
  return run
}

/**
 * One warm-up per host: instances sharing the storage take the install lock
 * (app/runtime/install_lock.ts), and a waiter finds the cache made.
 */
async function warm(dir: string, options: WarmOptions): Promise<string> {
  await mkdir(join(dir, '..'), { recursive: true })
  const held = await acquireInstallLock(`${dir}.lock`, 'openclaw compile cache', {
    log: options.log,
  })
  try {
    if (existsSync(join(dir, 'node-compile-cache'))) return dir
    return await warmNow(dir, options)
  } finally {
    await held.release()
  }
}

async function warmNow(dir: string, options: WarmOptions): Promise<string> {
  const started = Date.now()
  const staging = `${dir}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`
  const state = join(staging, 'state')
  const workspace = join(state, 'workspace')
  const tmp = join(staging, 'tmp')
  const home = join(staging, 'home')
  for (const folder of [workspace, tmp, home]) await mkdir(folder, { recursive: true })
  options.log('warming the openclaw compile cache (one gateway boot)')
  const port = await allocatePort()
  const token = randomBytes(24).toString('hex')
  await writeFile(join(state, 'openclaw.json'), options.renderConfig(port, state, workspace), {
    mode: 0o600,
  })
  const child = spawn(
    options.nodeExecutable,
    [join(options.packageDir, 'openclaw.mjs'), 'gateway', 'run', '--port', String(port)],
    {
      cwd: workspace,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: home,
        TMPDIR: tmp,
        XDG_CACHE_HOME: join(home, '.cache'),
        LANG: 'C.UTF-8',
        ...options.environment(state, workspace, token),
      },
      stdio: 'ignore',
    }
  )
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.once('error', () => undefined)
  try {
    const deadline = Date.now() + (options.timeoutMs ?? 300_000)
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(
          `the gateway exited during the warm-up (${child.exitCode ?? child.signalCode})`
        )
      }
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`, {
        signal: AbortSignal.timeout(2000),
      }).catch(() => undefined)
      if (ready?.ok) break
      if (Date.now() > deadline) throw new Error('the gateway did not become ready in time')
      await sleep(500)
    }
  } finally {
    // A clean exit: Node writes the cache when the process ends.
    child.kill('SIGTERM')
    await Promise.race([exited, sleep(30_000)])
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
  }
  const written = join(tmp, 'node-compile-cache')
  if (!existsSync(written)) {
    await rm(staging, { recursive: true, force: true })
    throw new Error('the gateway wrote no compile cache')
  }
  await mkdir(join(dir, '..'), { recursive: true })
  const target = stagingName(dir)
  await mkdir(target, { recursive: true })
  await rename(written, join(target, 'node-compile-cache'))
  await rm(staging, { recursive: true, force: true })
  // Readable by agents before anyone can see it.
  await shareTree(target)
  // Another instance that finished first keeps its copy: as good as this one.
  await publishOnce(target, dir)
  options.log(`openclaw compile cache warmed in ${Math.round((Date.now() - started) / 1000)} s`)
  return dir
}

/** Readable by every agent's uid (Node writes its cache files 0600), writable by nobody else. */
async function shareTree(path: string): Promise<void> {
  await chmod(path, 0o755)
  for (const entry of await readdir(path, { withFileTypes: true })) {
    const child = join(path, entry.name)
    if (entry.isDirectory()) await shareTree(child)
    else if (entry.isFile()) await chmod(child, 0o644)
  }
}

/** Folders Node named for the warming process's user id (`...-<uid>`), at any depth. */
async function uidFolders(root: string, uid: number): Promise<string[]> {
  const found: string[] = []
  for (const entry of await readdir(root, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue
    const path = join(root, entry.name)
    if (entry.name.endsWith(`-${uid}`) && entry.name.startsWith('v')) found.push(path)
    else found.push(...(await uidFolders(path, uid)))
  }
  return found
}

/**
 * Links the shared cache into an agent's TMPDIR for `agentUid` (where
 * OpenClaw and Node look for it), unless the agent has an OpenClaw cache of
 * its own already. Returns true when seeded. The TMPDIR is the agent's: every
 * step walks it from the agents folder without following a link the agent
 * put there (app/runtime/files/confined_dir.ts); a TMPDIR it shaped so that
 * this cannot be done is left unseeded.
 */
export async function seedCompileCache(
  sharedDir: string,
  folders: Pick<AgentFolders, 'root' | 'tmp'>,
  agentUid: number
): Promise<boolean> {
  const agentsDir = dirname(folders.root)
  const own = join(folders.tmp, 'node-compile-cache')
  const existing = await inFolderBelow(agentsDir, relative(agentsDir, own), undefined, (dir) =>
    lstat(dir.path('openclaw'))
  ).catch(() => undefined)
  if (existing) return false
  const source = join(sharedDir, 'node-compile-cache')
  const warmedBy = process.getuid?.() ?? 0
  try {
    for (const folder of await uidFolders(source, warmedBy)) {
      const target = join(own, relative(source, folder)).replace(
        new RegExp(`-${warmedBy}$`),
        `-${agentUid}`
      )
      await symlinkBelow(agentsDir, target, folder, { mode: 0o755 })
    }
  } catch {
    return false
  }
  return true
}
