import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { chmod, lchown, mkdir, readdir, stat, writeFile } from 'node:fs/promises'
import { dirname, isAbsolute, join } from 'node:path'
import type { AgentPaths } from '#runtime/agent_paths'
import type { ProcessLaunch } from '#plugins/types'

/**
 * The process driver's tenant sandbox (docs/runtime.md "Isolation").
 *
 * - Every agent runs as a user id of its own (derived from its id, no
 *   account needed), so the host's permissions already keep it out of the
 *   service's files (APP_KEY 0600, the database folder) and out of other
 *   agents' folders (0700, each owned by its agent's uid).
 * - Inside bubblewrap it sees its own mount namespace: only its own folders
 *   (read-write), the framework runtime and the Node.js binary (read-only),
 *   the system's /usr and a few files of /etc; its own /proc, /dev and /tmp;
 *   no /work, /root, /home or service storage. The network is shared (it
 *   reaches the model proxy and the internet).
 * - prlimit caps its process count (RLIMIT_NPROC counts per uid, and the
 *   uid is the agent's own) and open files.
 *
 * Without bubblewrap the agent still runs under its own uid (when the
 * service runs as root), which a warning in the log says; without root it
 * runs as the service's user, said the same way.
 */
export const BWRAP = ['/usr/bin/bwrap', '/bin/bwrap'].find((path) => existsSync(path))
const PRLIMIT = ['/usr/bin/prlimit', '/bin/prlimit'].find((path) => existsSync(path))

/**
 * New user, IPC, UTS and cgroup namespaces plus the mount namespace; the
 * network and pid namespaces stay the host's: the agent reaches the model
 * proxy on loopback, and bubblewrap execs the framework directly, so the
 * supervisor's SIGTERM reaches it (a pid namespace's init would take the
 * whole tree down with SIGKILL at once). In /proc it sees other processes
 * exist, not their environment or files (other uids).
 */
const NAMESPACES = ['--unshare-user-try', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try']

/** First uid of the range agents get (far above any account a system creates). */
const AGENT_UID_BASE = 1_000_000
const AGENT_UID_SPAN = 2 ** 30

/** The agent's own user (and group) id: stable, derived from its id. */
export function agentUid(agentId: string): number {
  const digest = createHash('sha256').update(`agent-uid:${agentId}`).digest()
  return AGENT_UID_BASE + (digest.readUInt32BE(0) % AGENT_UID_SPAN)
}

const runsAsRoot = process.getuid?.() === 0

/** The user id an agent's processes run under: its own as root, else the service's. */
export function agentRunUid(agentId: string): number {
  return runsAsRoot ? agentUid(agentId) : (process.getuid?.() ?? 0)
}
let bubblewrapProbe: boolean | undefined

/** True when bubblewrap is installed and can make a sandbox as an unprivileged user here. */
export function bubblewrapWorks(): boolean {
  if (bubblewrapProbe !== undefined) return bubblewrapProbe
  if (!BWRAP) return (bubblewrapProbe = false)
  const probe = spawnSync(
    BWRAP,
    [
      ...[...NAMESPACES, '--ro-bind', '/usr', '/usr', '--ro-bind', '/proc', '/proc'],
      ...['--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64'],
      '/usr/bin/true',
    ],
    { stdio: 'ignore', timeout: 10_000, ...(runsAsRoot ? { uid: 65534, gid: 65534 } : {}) }
  )
  return (bubblewrapProbe = probe.status === 0)
}

export interface SandboxRequest {
  agentId: string
  paths: AgentPaths
  launch: ProcessLaunch
  /** Read-only paths the framework needs (its installed package, the Node.js binary). */
  readOnly: string[]
  /** Most processes the agent may run at once. */
  maxProcesses: number
}

export interface SandboxedLaunch {
  command: string
  args: string[]
  uid?: number
  gid?: number
  /** How the agent is confined, for the log. */
  confinement: 'bubblewrap' | 'uid' | 'none'
}

/** System files a program commonly reads; bound read-only when the host has them. */
const SYSTEM_FILES = [
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/nsswitch.conf',
  '/etc/localtime',
  '/etc/mime.types',
]

/** The agent's own folders: read-write inside the sandbox, owned by its uid. */
function ownFolders(paths: AgentPaths): string[] {
  return [paths.workspace, paths.state, paths.home, paths.tmp, paths.cache]
}

/** Adds search permission for others to a folder of the service's that lacks it. */
async function allowTraversal(folder: string) {
  const info = await stat(folder).catch(() => undefined)
  if (info && (info.mode & 0o001) === 0) await chmod(folder, (info.mode & 0o7777) | 0o111)
}

async function chownTree(path: string, uid: number, gid: number): Promise<void> {
  await lchown(path, uid, gid)
  let entries
  try {
    entries = await readdir(path, { withFileTypes: true })
  } catch {
    return
  }
  for (const entry of entries) {
    const child = join(path, entry.name)
    if (entry.isDirectory()) await chownTree(child, uid, gid)
    else await lchown(child, uid, gid)
  }
}

/**
 * Turns a framework's launch into the sandboxed one, and hands the agent's
 * folders to its uid. Call before every start (the service writes rendered
 * files into them as itself).
 */
export async function sandboxLaunch(request: SandboxRequest): Promise<SandboxedLaunch> {
  const { paths, launch } = request
  const uid = runsAsRoot ? agentUid(request.agentId) : undefined
  if (uid !== undefined) {
    // The agents folder lets each agent through to its own folder and lists
    // nothing; every folder above it must let the agent's uid through too.
    await chmod(dirname(paths.root), 0o711)
    for (let folder = dirname(dirname(paths.root)); ; folder = dirname(folder)) {
      await allowTraversal(folder)
      if (dirname(folder) === folder) break
    }
    await lchown(paths.root, uid, uid)
    for (const folder of ownFolders(paths)) await chownTree(folder, uid, uid)
  }
  const limited = (command: string, args: string[]) =>
    PRLIMIT
      ? {
          command: PRLIMIT,
          args: [
            `--nproc=${request.maxProcesses}:${request.maxProcesses}`,
            '--nofile=4096:4096',
            '--',
            command,
            ...args,
          ],
        }
      : { command, args }

  if (!bubblewrapWorks()) {
    return {
      ...limited(launch.command, launch.args),
      uid,
      gid: uid,
      confinement: uid === undefined ? 'none' : 'uid',
    }
  }

  // Without an account in the host's files, os.userInfo() fails: give it one of its own,
  // in a folder the service owns (the agent reads, never changes it).
  const etc = join(paths.root, 'sandbox-etc')
  await mkdir(etc, { recursive: true, mode: 0o755 })
  const passwd = join(etc, 'passwd')
  const group = join(etc, 'group')
  const id = uid ?? process.getuid?.() ?? 65534
  await writeFile(passwd, `agent:x:${id}:${id}:agent:${paths.home}:/bin/sh\n`, { mode: 0o644 })
  await writeFile(group, `agent:x:${id}:\n`, { mode: 0o644 })

  const args = [
    ...NAMESPACES,
    ...['--ro-bind', '/usr', '/usr'],
    ...['--symlink', 'usr/bin', '/bin', '--symlink', 'usr/sbin', '/sbin'],
    ...['--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64'],
    ...['--ro-bind', '/proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp'],
    ...['--ro-bind', passwd, '/etc/passwd', '--ro-bind', group, '/etc/group'],
    ...SYSTEM_FILES.filter((path) => existsSync(path)).flatMap((path) => ['--ro-bind', path, path]),
    // The launched program itself, when it lives outside the other mounts.
    ...[...request.readOnly, ...(isAbsolute(launch.command) ? [launch.command] : [])]
      .filter((path) => existsSync(path))
      .flatMap((path) => ['--ro-bind', path, path]),
    ...ownFolders(paths).flatMap((path) => ['--bind', path, path]),
    ...['--chdir', paths.workspace],
    '--',
    launch.command,
    ...launch.args,
  ]
  return { ...limited(BWRAP!, args), uid, gid: uid, confinement: 'bubblewrap' }
}
