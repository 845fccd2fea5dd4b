import { spawnSync } from 'node:child_process'
import { existsSync, statSync } from 'node:fs'
import { chmod, lstat, mkdir, symlink, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import type { ProcessLaunch } from '#plugins/types'
import type { AgentPaths } from '#runtime/agent_paths'

/**
 * The bubblewrap sandbox (what agents get in it: sandbox.ts): as root the
 * root layout (a root folder of the agent's own, the uid dropped with
 * setpriv, the output opened inside the namespace; what CRIU can
 * checkpoint), with the fixed layout for template frameworks; without
 * root an unprivileged user namespace.
 */
export const BWRAP = ['/usr/bin/bwrap', '/bin/bwrap'].find((path) => existsSync(path))
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

const runsAsRoot = process.getuid?.() === 0

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

/** An account of its own in the sandbox's /etc: without one, os.userInfo() fails. */
export function accountFiles(id: number, home: string) {
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

export interface BubblewrapRequest {
  paths: AgentPaths
  launch: ProcessLaunch
  /** Bound read-only (system files, the framework's package, the Node.js binary). */
  readOnly: string[]
  /** Bound read-write: the agent's own folders. */
  readWrite: string[]
  /** The account in the sandbox's /etc (accountFiles). */
  account: { passwd: string; group: string }
  /** The uid (and gid) the framework runs under inside. */
  id: number
  /** The agent's own uid, when the service runs as root. */
  uid?: number
  /** A seccomp program (app/runtime/process/seccomp.ts), read from descriptor 3. */
  seccompFile?: string
  /** The fixed layout (root layout only; SandboxRequest.fixedLayout). */
  fixedLayout?: boolean
}

/**
 * bubblewrap's arguments for the launch, and what the sandbox is made of
 * (sandboxLaunch wraps the command in the process limits).
 */
export async function bubblewrapLaunch(request: BubblewrapRequest): Promise<{
  args: string[]
  inheritFiles: string[]
  uid?: number
  gid?: number
  rootDir?: string
  mounts?: Array<{ name: string; inside: string; host: string }>
}> {
  const { paths, launch, readOnly, id } = request
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
      : [...request.readWrite, paths.logFile].map((path): [string, string] => [path, path])
    const logInside = fixed ? FIXED_LOG : paths.logFile
    const binds: Array<[string, string]> = [
      ...readOnly.map((path): [string, string] => [path, path]),
      ...writable,
    ]
    await prepareRootDir(
      rootDir,
      binds,
      fixed ? accountFiles(id, FIXED_FOLDERS.home) : request.account
    )
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
    return { args, inheritFiles, rootDir, mounts }
  }

  // Account files in the service's folder of the agent (the agent reads, never changes them).
  const etc = paths.sandboxEtc
  await mkdir(etc, { recursive: true, mode: 0o755 })
  const passwd = join(etc, 'passwd')
  const group = join(etc, 'group')
  await writeFile(passwd, request.account.passwd, { mode: 0o644 })
  await writeFile(group, request.account.group, { mode: 0o644 })

  const args = [
    ...seccomp,
    ...USER_NAMESPACES,
    ...['--ro-bind', '/usr', '/usr'],
    ...['--symlink', 'usr/bin', '/bin', '--symlink', 'usr/sbin', '/sbin'],
    ...['--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64'],
    ...['--ro-bind', '/proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp'],
    ...['--ro-bind', passwd, '/etc/passwd', '--ro-bind', group, '/etc/group'],
    ...readOnly.flatMap((path) => ['--ro-bind', path, path]),
    ...request.readWrite.flatMap((path) => ['--bind', path, path]),
    ...['--chdir', paths.workspace],
    '--',
    launch.command,
    ...launch.args,
  ]
  return { args, uid: request.uid, gid: request.uid, inheritFiles }
}
