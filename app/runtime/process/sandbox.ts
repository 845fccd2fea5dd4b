import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, statSync } from 'node:fs'
import { chmod, lstat, mkdir, stat, symlink, writeFile } from 'node:fs/promises'
import { dirname, isAbsolute, join } from 'node:path'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import type { AgentPaths } from '#runtime/agent_paths'
import { chownTreeBelow } from '#runtime/files/confined_dir'
import type { ProcessLaunch } from '#plugins/types'
import { unshareLaunch, unshareSandboxAvailability } from '#runtime/process/unshare_sandbox'

/**
 * The process driver's tenant sandbox (docs/runtime.md "Isolation").
 *
 * - Every agent runs as a user id of its own (derived from its id, no
 *   account needed), so the host's permissions already keep it out of the
 *   service's files (APP_KEY 0600, the database folder) and out of other
 *   agents' folders (0700, each owned by its agent's uid). Its top folder
 *   and the service's files of it (app/runtime/agent_paths.ts) are not its.
 * - Inside bubblewrap it sees its own mount namespace: only its own folders
 *   (read-write), the framework runtime and the Node.js binary (read-only),
 *   the system's /usr and a few files of /etc; its own /proc (as root: with
 *   every other uid's processes hidden), /dev and /tmp;
 *   no /work, /root, /home or service storage. The network is shared (it
 *   reaches the model proxy and the internet).
 * - prlimit caps its process count (RLIMIT_NPROC counts per uid, and the
 *   uid is the agent's own) and open files; a seccomp filter refuses io_uring.
 *
 * As root (the usual case) bubblewrap builds the namespace as root, on a
 * root folder of the agent's own (`sandbox-root`, in the service's folder
 * of the agent: the mount points and its /etc/passwd), and drops to the
 * agent's uid with setpriv (no capabilities, no new privileges) before the
 * framework starts; the framework's output is opened inside the
 * namespace. That layout is what CRIU can checkpoint
 * and restore (app/runtime/process/checkpoint.ts). Without root, bubblewrap
 * makes an unprivileged user namespace instead (no checkpoints).
 *
 * Without bubblewrap, util-linux's unshare makes a sandbox of the same
 * shape (app/runtime/process/unshare_sandbox.ts). Where neither works no
 * agent starts (a clear error) until `AGENT_SANDBOX=none` says to run them
 * unsandboxed on purpose: then under their own uids as root, else as the
 * service's user, with a warning in the log.
 */
export const BWRAP = ['/usr/bin/bwrap', '/bin/bwrap'].find((path) => existsSync(path))
const PRLIMIT = ['/usr/bin/prlimit', '/bin/prlimit'].find((path) => existsSync(path))
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path))
const MOUNT = ['/usr/bin/mount', '/bin/mount'].find((path) => existsSync(path))

/**
 * The root layout's step inside the namespace, still as root: a procfs of
 * the sandbox's own over /proc that hides the processes of every other uid
 * (hidepid), then the output opened and the uid drop exec'd. There is no
 * pid namespace (the supervisor's SIGTERM must reach the framework, and
 * CRIU dumps the tree in the host's), and bubblewrap's `--proc` then only
 * binds the host's /proc: without this the agent would list every host
 * process and its command line. Never a remount, which would change the
 * host's /proc itself; `invisible` is accepted from Linux 5.8 on, where
 * each procfs mount has options of its own (an older kernel refuses it,
 * and /proc stays as bubblewrap made it).
 */
const ROOT_LAYOUT_STEP = [
  ...(MOUNT ? [`${MOUNT} -t proc -o nosuid,nodev,noexec,hidepid=invisible proc /proc`] : []),
  'exec "$@" </dev/null >>"$0" 2>&1',
].join('; ')

/**
 * Without root: new user, IPC, UTS and cgroup namespaces plus the mount
 * namespace; the network and pid namespaces stay the host's: the agent
 * reaches the model proxy on loopback, and bubblewrap execs the framework
 * directly, so the supervisor's SIGTERM reaches it (a pid namespace's init
 * would take the whole tree down with SIGKILL at once). In /proc it sees
 * other processes exist, not their environment or files (other uids).
 */
const USER_NAMESPACES = [
  '--unshare-user-try',
  '--unshare-ipc',
  '--unshare-uts',
  '--unshare-cgroup-try',
]
/**
 * As root: IPC and UTS namespaces plus the mount namespace. No user
 * namespace (the uid drop does its job, and CRIU restores only namespaces
 * the init user namespace owns), no cgroup namespace (CRIU).
 */
const ROOT_NAMESPACES = ['--unshare-ipc', '--unshare-uts']

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

/** True when the root layout applies here: root, bubblewrap and setpriv. */
function usesRootLayout(): boolean {
  return runsAsRoot && SETPRIV !== undefined
}

let bubblewrapProbe: boolean | undefined

/** True when bubblewrap is installed and can make this host's kind of sandbox. */
export function bubblewrapWorks(): boolean {
  if (bubblewrapProbe !== undefined) return bubblewrapProbe
  if (!BWRAP) return (bubblewrapProbe = false)
  const probe = spawnSync(
    BWRAP,
    [
      ...(usesRootLayout() ? ROOT_NAMESPACES : USER_NAMESPACES),
      ...['--ro-bind', '/usr', '/usr', '--proc', '/proc'],
      ...['--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64'],
      ...(usesRootLayout() ? [SETPRIV!, '--reuid=65534', '--regid=65534', '--clear-groups'] : []),
      '/usr/bin/true',
    ],
    {
      stdio: 'ignore',
      timeout: 10_000,
      ...(runsAsRoot && !usesRootLayout() ? { uid: 65534, gid: 65534 } : {}),
    }
  )
  return (bubblewrapProbe = probe.status === 0)
}

/** `AGENT_SANDBOX`: which sandbox process-driver agents get (docs/runtime.md "Isolation"). */
export const SANDBOX_MODES = ['auto', 'bubblewrap', 'unshare', 'none'] as const
export type SandboxMode = (typeof SANDBOX_MODES)[number]
export type SandboxKind = Exclude<SandboxMode, 'auto'>

/**
 * The sandbox `mode` gives agents here: `auto` the strongest the host allows
 * (bubblewrap, else unshare), never none. Throws, naming what is missing,
 * when the mode cannot be had (the agent's start fails with that message).
 */
export function chooseSandbox(mode: SandboxMode, haveSeccompFilter: boolean): SandboxKind {
  if (mode === 'none') return 'none'
  const bubblewrap = () =>
    bubblewrapWorks()
      ? undefined
      : BWRAP
        ? 'bubblewrap cannot make a sandbox here'
        : 'bubblewrap is not installed (apt-get install bubblewrap)'
  const unshare = () => {
    const { works, reason } = unshareSandboxAvailability(haveSeccompFilter)
    return works ? undefined : `the unshare sandbox cannot be made: ${reason}`
  }
  const refuse = (why: string) => {
    throw new ServiceUnavailableException(
      `Agents cannot start: ${why}. Set AGENT_SANDBOX=none only to run agents without a sandbox on purpose`
    )
  }
  if (mode === 'bubblewrap') {
    const missing = bubblewrap()
    return missing ? refuse(`AGENT_SANDBOX=bubblewrap, but ${missing}`) : 'bubblewrap'
  }
  if (mode === 'unshare') {
    const missing = unshare()
    return missing ? refuse(`AGENT_SANDBOX=unshare, but ${missing}`) : 'unshare'
  }
  const noBubblewrap = bubblewrap()
  if (!noBubblewrap) return 'bubblewrap'
  const noUnshare = unshare()
  return noUnshare ? refuse(`no sandbox works here: ${noBubblewrap}; ${noUnshare}`) : 'unshare'
}

export interface SandboxRequest {
  /** AGENT_SANDBOX; default auto. */
  mode?: SandboxMode
  agentId: string
  paths: AgentPaths
  launch: ProcessLaunch
  /** Read-only paths the framework needs (its installed package, the Node.js binary). */
  readOnly: string[]
  /** Most processes the agent may run at once. */
  maxProcesses: number
  /** A seccomp program for bubblewrap (app/runtime/process/seccomp.ts), when there is one. */
  seccompFile?: string
  /**
   * The fixed layout (root layout only): the agent's folders at the same
   * paths inside every agent's sandbox (FIXED_FOLDERS) and a pid namespace
   * of its own, so that one agent's checkpoint can be restored as another
   * (app/runtime/process/template.ts).
   */
  fixedLayout?: boolean
}

/**
 * Where the fixed layout binds an agent's folders and its output: the same
 * for every agent, so nothing in its processes names its id.
 */
export const FIXED_FOLDERS = {
  root: '/agent',
  workspace: '/agent/workspace',
  state: '/agent/state',
  home: '/agent/home',
  tmp: '/agent/tmp',
  cache: '/agent/cache',
} as const
const FIXED_LOG = '/agent/output.log'

/**
 * The fixed layout's binds, by the name CRIU's images give them (`--external
 * mnt[<inside>]:<name>` at a dump, `mnt[<name>]:<host path>` at a restore).
 */
export function fixedMounts(
  paths: AgentPaths
): Array<{ name: string; inside: string; host: string }> {
  return [
    ...(['workspace', 'state', 'home', 'tmp', 'cache'] as const).map((name) => ({
      name,
      inside: FIXED_FOLDERS[name],
      host: paths[name],
    })),
    { name: 'output', inside: FIXED_LOG, host: paths.logFile },
  ]
}

/** True when the fixed layout can be had here (root, bubblewrap, setpriv). */
export function fixedLayoutAvailable(): boolean {
  return usesRootLayout() && bubblewrapWorks()
}

export interface SandboxedLaunch {
  command: string
  args: string[]
  uid?: number
  gid?: number
  /** How the agent is confined, for the log. */
  confinement: 'bubblewrap' | 'unshare' | 'uid' | 'none'
  /** Something the service's log should say once (a host setting the sandbox changed). */
  note?: string
  /** Files the launch reads from inherited descriptors 3, 4, …, opened at each spawn. */
  inheritFiles: string[]
  /**
   * The root folder of a root-layout sandbox: its processes can be
   * checkpointed, and are restored on top of it. Unset otherwise.
   */
  rootDir?: string
  /** The binds a fixed-layout sandbox names for CRIU (fixedMounts); unset otherwise. */
  mounts?: Array<{ name: string; inside: string; host: string }>
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

/** An account of its own in the sandbox's /etc: without one, os.userInfo() fails. */
function accountFiles(id: number, home: string) {
  return {
    passwd: `agent:x:${id}:${id}:agent:${home}:/bin/sh\n`,
    group: `agent:x:${id}:\n`,
  }
}

/** Makes `target` (inside `root`) a mount point of the same kind as `source`: folder or file. */
async function mountPoint(root: string, source: string, target: string) {
  const inside = join(root, target)
  if (existsSync(inside)) return
  await mkdir(dirname(inside), { recursive: true, mode: 0o755 })
  if (statSync(source).isDirectory()) await mkdir(inside, { recursive: true, mode: 0o755 })
  else await writeFile(inside, '', { mode: 0o644 })
}

/** The folders strictly between /tmp and each target, parents first, once each. */
function foldersUnderTmp(targets: string[]): string[] {
  const folders = new Set<string>()
  for (const target of targets) {
    if (!target.startsWith('/tmp/')) continue
    const chain: string[] = []
    for (let folder = dirname(target); folder !== '/tmp'; folder = dirname(folder)) {
      chain.unshift(folder)
    }
    for (const folder of chain) folders.add(folder)
  }
  return [...folders]
}

/**
 * The agent's sandbox root (`<agents>/.runtime/<id>/sandbox-root`, the
 * service's, read-only to the agent): the mount points of every bind, the /bin and /lib links
 * into /usr, and its /etc/passwd and /etc/group.
 */
async function prepareRootDir(
  rootDir: string,
  binds: Array<[source: string, target: string]>,
  account: { passwd: string; group: string }
) {
  await mkdir(rootDir, { recursive: true, mode: 0o755 })
  await chmod(rootDir, 0o755)
  for (const folder of ['usr', 'proc', 'dev', 'tmp', 'etc']) {
    await mkdir(join(rootDir, folder), { recursive: true, mode: 0o755 })
  }
  for (const [name, target] of [
    ['bin', 'usr/bin'],
    ['sbin', 'usr/sbin'],
    ['lib', 'usr/lib'],
    ['lib64', 'usr/lib64'],
  ]) {
    const link = join(rootDir, name)
    if (!(await lstat(link).catch(() => undefined))) await symlink(target, link)
  }
  await writeFile(join(rootDir, 'etc', 'passwd'), account.passwd, { mode: 0o644 })
  await writeFile(join(rootDir, 'etc', 'group'), account.group, { mode: 0o644 })
  for (const [source, target] of binds) await mountPoint(rootDir, source, target)
}

/**
 * Turns a framework's launch into the sandboxed one, and hands the agent's
 * folders to its uid. Call before every start (the service writes rendered
 * files into them as itself).
 */
export async function sandboxLaunch(request: SandboxRequest): Promise<SandboxedLaunch> {
  const { paths, launch } = request
  const kind = chooseSandbox(request.mode ?? 'auto', request.seccompFile !== undefined)
  const uid = runsAsRoot ? agentUid(request.agentId) : undefined
  if (uid !== undefined) {
    // The agents folder lets each agent through to its own folder and lists
    // nothing; every folder above it must let the agent's uid through too.
    await chmod(dirname(paths.root), 0o711)
    for (let folder = dirname(dirname(paths.root)); ; folder = dirname(folder)) {
      await allowTraversal(folder)
      if (dirname(folder) === folder) break
    }
    // `<agents>/<id>` itself stays the service's (ensureAgentFolders): only
    // its own folders are the agent's, handed over without following a link.
    for (const folder of ownFolders(paths)) {
      await chownTreeBelow(paths.agentsDir, folder, { uid, gid: uid })
    }
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

  if (kind === 'none') {
    return {
      ...limited(launch.command, launch.args),
      uid,
      gid: uid,
      confinement: uid === undefined ? 'none' : 'uid',
      inheritFiles: [],
    }
  }

  const id = uid ?? process.getuid?.() ?? 65534
  const account = accountFiles(id, paths.home)
  const readOnly = [
    ...SYSTEM_FILES,
    ...request.readOnly,
    // The launched program itself, when it lives outside the other mounts.
    ...(isAbsolute(launch.command) ? [launch.command] : []),
  ].filter((path) => existsSync(path))
  if (kind === 'unshare') {
    const unshared = await unshareLaunch({
      paths,
      launch,
      readOnly,
      readWrite: ownFolders(paths),
      account,
      uid: id,
      seccompFile: request.seccompFile,
    })
    return {
      ...limited(unshared.command, unshared.args),
      confinement: 'unshare',
      inheritFiles: [],
      note: unshared.note,
    }
  }

  const seccomp = request.seccompFile ? ['--seccomp', '3'] : []
  const inheritFiles = request.seccompFile ? [request.seccompFile] : []

  if (usesRootLayout()) {
    const rootDir = paths.sandboxRoot
    // Bound in, so it must exist (the service's, 0600: the agent only holds it open).
    await writeFile(paths.logFile, '', { flag: 'a', mode: 0o600 })
    const fixed = request.fixedLayout === true
    const mounts = fixed ? fixedMounts(paths) : undefined
    // Own folders and the output: at their host paths, or at the fixed ones.
    const writable: Array<[string, string]> = mounts
      ? mounts.map(({ host, inside }): [string, string] => [host, inside])
      : [...ownFolders(paths), paths.logFile].map((path): [string, string] => [path, path])
    const logInside = fixed ? FIXED_LOG : paths.logFile
    const binds: Array<[string, string]> = [
      ...readOnly.map((path): [string, string] => [path, path]),
      ...writable,
    ]
    await prepareRootDir(rootDir, binds, fixed ? accountFiles(id, FIXED_FOLDERS.home) : account)
    const args = [
      ...seccomp,
      ...ROOT_NAMESPACES,
      // The fixed layout: a pid namespace whose init is the framework itself (CRIU restores
      // it in a new one, so two agents restored from one template never want the same pids),
      // in a session of its own (CRIU wants the session leader inside the namespace).
      ...(fixed ? ['--unshare-pid', '--as-pid-1', '--new-session'] : []),
      ...['--ro-bind', rootDir, '/', '--ro-bind', '/usr', '/usr'],
      ...['--proc', '/proc', '--dev', '/dev', '--perms', '1777', '--tmpfs', '/tmp'],
      // Mount points under the fresh /tmp (agents folders in /tmp, as in tests) are made
      // there, as root: let the agent's uid through them.
      ...foldersUnderTmp(binds.map(([, target]) => target)).flatMap((folder) => [
        ...['--perms', '0755', '--dir', folder],
      ]),
      ...readOnly.flatMap((path) => ['--ro-bind', path, path]),
      // Its folders, and its output, opened inside the namespace (below) so that CRIU finds it there.
      ...writable.flatMap(([source, target]) => ['--bind', source, target]),
      ...['--chdir', fixed ? FIXED_FOLDERS.workspace : paths.workspace],
      '--',
      '/bin/sh',
      ...['-c', ROOT_LAYOUT_STEP, logInside],
      SETPRIV!,
      ...[`--reuid=${id}`, `--regid=${id}`, '--clear-groups', '--no-new-privs'],
      ...['--inh-caps=-all', '--bounding-set=-all', '--'],
      launch.command,
      ...launch.args,
    ]
    return { ...limited(BWRAP!, args), confinement: 'bubblewrap', inheritFiles, rootDir, mounts }
  }

  // Account files in the service's folder of the agent (the agent reads, never changes them).
  const etc = paths.sandboxEtc
  await mkdir(etc, { recursive: true, mode: 0o755 })
  const passwd = join(etc, 'passwd')
  const group = join(etc, 'group')
  await writeFile(passwd, account.passwd, { mode: 0o644 })
  await writeFile(group, account.group, { mode: 0o644 })

  const args = [
    ...seccomp,
    ...USER_NAMESPACES,
    ...['--ro-bind', '/usr', '/usr'],
    ...['--symlink', 'usr/bin', '/bin', '--symlink', 'usr/sbin', '/sbin'],
    ...['--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64'],
    ...['--ro-bind', '/proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp'],
    ...['--ro-bind', passwd, '/etc/passwd', '--ro-bind', group, '/etc/group'],
    ...readOnly.flatMap((path) => ['--ro-bind', path, path]),
    ...ownFolders(paths).flatMap((path) => ['--bind', path, path]),
    ...['--chdir', paths.workspace],
    '--',
    launch.command,
    ...launch.args,
  ]
  return { ...limited(BWRAP!, args), uid, gid: uid, confinement: 'bubblewrap', inheritFiles }
}
