import { spawnSync } from 'node:child_process'
import { accessSync, constants, existsSync, lstatSync, mkdirSync } from 'node:fs'
import { readlinkSync, rmSync, statSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import type { AgentPaths } from '#runtime/agent_paths'
import {
  disableIoUringForUnprivileged,
  IO_URING_SYSCTL,
  ioUringDisabledLevel,
} from '#runtime/io_uring_sysctl'

/**
 * The process sandbox where bubblewrap is missing (`AGENT_SANDBOX=unshare`,
 * docs/runtime.md "Isolation"): only util-linux, which every Linux host has.
 *
 * As root, `unshare` makes new mount, pid, IPC, UTS and cgroup namespaces
 * and runs a small shell script as the pid namespace's init. The script
 * builds the agent's root on a tmpfs, like bubblewrap's root layout: /usr
 * (and the host's /bin, /lib links or folders), a few /etc files, the
 * framework runtime and Node.js read-only; the agent's own folders
 * read-write; its own /proc (its processes only), /dev (with pseudo-terminals), /tmp, /dev/shm;
 * every mount nosuid and nodev (only /dev's device files keep their
 * devices). It then pivots into that root, detaches the host's, makes the
 * root read-only, and starts the framework through setpriv: the agent's
 * uid and gid, no supplementary groups, no capabilities (inheritable,
 * ambient and bounding sets cleared), no new privileges, in a session of its
 * own. The init stays root, out of the agent's reach (another uid), reaps
 * orphans and passes SIGTERM, SIGINT and SIGHUP on to the framework, once:
 * the supervisor's stop is graceful. When unshare dies (SIGKILL), the
 * init is killed with it (`--kill-child`) and the kernel kills the whole
 * namespace.
 *
 * io_uring is refused with the same seccomp program as bubblewrap's where
 * setpriv can load one (`--seccomp-filter`, util-linux 2.40+); otherwise
 * with `kernel.io_uring_disabled=1`, which the service sets (as root) at
 * the first start in this mode: io_uring then needs CAP_SYS_ADMIN or the
 * `kernel.io_uring_group`, neither of which an agent has. That sysctl is
 * host-wide (other unprivileged programs lose io_uring too); see
 * docs/runtime.md for why it was chosen. Where neither works the mode is
 * unavailable.
 *
 * The launch joins the network namespace it is started in: a per-agent
 * network namespace wraps it (runs the command in the namespace), as it
 * wraps bubblewrap's. Not checkpointable (CRIU): a sleep is a plain stop.
 */

const find = (...candidates: string[]) => candidates.find((path) => existsSync(path))
const UNSHARE = find('/usr/bin/unshare', '/bin/unshare')
const SETPRIV = find('/usr/bin/setpriv', '/bin/setpriv')
const SETSID = find('/usr/bin/setsid', '/bin/setsid')
const MOUNT = find('/usr/bin/mount', '/bin/mount')
const UMOUNT = find('/usr/bin/umount', '/bin/umount')
const PIVOT_ROOT = find('/usr/sbin/pivot_root', '/sbin/pivot_root', '/usr/bin/pivot_root')
const SHELL = '/bin/sh'

const NAMESPACES = [
  ...['--mount', '--pid', '--ipc', '--uts', '--cgroup'],
  ...['--fork', '--kill-child', '--propagation', 'private'],
]

/** Host device files bound into the sandbox's /dev (the only mounts that keep devices). */
const DEVICES = ['null', 'zero', 'full', 'random', 'urandom', 'tty']

/** Top-level links (merged /usr) or folders of the host that programs expect. */
const TOP_LEVEL = ['bin', 'sbin', 'lib', 'lib64', 'lib32', 'libx32']

/** How io_uring is refused in this mode here, or why it cannot be. */
type IoUringRefusal = { how: 'seccomp' } | { how: 'sysctl' } | { how?: undefined; reason: string }

export interface UnshareSandboxRequest {
  paths: AgentPaths
  launch: { command: string; args: string[] }
  /** Existing host paths, bound read-only at the same place. */
  readOnly: string[]
  /** The agent's own folders, bound read-write. */
  readWrite: string[]
  /** Its /etc/passwd and /etc/group. */
  account: { passwd: string; group: string }
  /** The agent's uid and gid. */
  uid: number
  /** The io_uring seccomp program (app/runtime/process/seccomp.ts), when there is one. */
  seccompFile?: string
}

/** Single-quoted for /bin/sh. */
function quote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`
}

let setprivSeccomp: boolean | undefined

/** True when this setpriv loads seccomp programs (util-linux 2.40+). */
function setprivLoadsSeccomp(): boolean {
  if (setprivSeccomp === undefined) {
    const help = SETPRIV ? spawnSync(SETPRIV, ['--help'], { encoding: 'utf8' }).stdout : ''
    setprivSeccomp = (help ?? '').includes('--seccomp-filter')
  }
  return setprivSeccomp
}

let refusal: IoUringRefusal | undefined

function ioUringRefusal(haveFilter: boolean): IoUringRefusal {
  if (haveFilter && setprivLoadsSeccomp()) return { how: 'seccomp' }
  if (refusal) return refusal
  const disabled = ioUringDisabledLevel()
  if (disabled === undefined) {
    refusal = {
      reason:
        'io_uring cannot be refused: setpriv has no --seccomp-filter (util-linux 2.40+) and the kernel has no kernel.io_uring_disabled (6.6+)',
    }
  } else if (disabled >= 1) {
    // With 1, members of kernel.io_uring_group may still use it: agents' groups are cleared
    // and their gid is their uid, far above any system group.
    refusal = { how: 'sysctl' }
  } else {
    try {
      accessSync(IO_URING_SYSCTL, constants.W_OK)
      refusal = { how: 'sysctl' }
    } catch {
      refusal = {
        reason:
          'io_uring cannot be refused: setpriv has no --seccomp-filter (util-linux 2.40+) and kernel.io_uring_disabled is 0 and not writable here',
      }
    }
  }
  return refusal
}

/** One bind of the plan: host path, read-only or not. */
interface Bind {
  path: string
  readOnly: boolean
}

/**
 * The init script. `$0` is the folder the new root is built on; `$@` the
 * program to run as the agent. Setup runs under `set -e`: any failing step
 * ends the start with the tool's own message in the agent's log.
 */
function initScript(plan: {
  binds: Bind[]
  account: { passwd: string; group: string }
  uid: number
  cwd: string
  seccompFile?: string
}): string {
  const lines = [
    'set -e',
    'agent_path="$PATH"',
    'PATH=/usr/sbin:/usr/bin:/sbin:/bin',
    'root="$0"',
    `${MOUNT} -n -t tmpfs -o mode=0755,nosuid,nodev agent-root "$root"`,
    'cd "$root"',
    'mkdir usr proc dev tmp etc .old-root',
  ]
  const topLevel: Bind[] = []
  for (const name of TOP_LEVEL) {
    const info = lstatSync(`/${name}`, { throwIfNoEntry: false })
    if (info?.isSymbolicLink()) lines.push(`ln -s ${quote(readlinkSync(`/${name}`))} ${name}`)
    else if (info?.isDirectory()) topLevel.push({ path: `/${name}`, readOnly: true })
  }
  // Parents before what is bound inside them (a prefix sorts first).
  const all = [...topLevel, ...plan.binds]
  const binds = [...new Map(all.map((bind) => [bind.path, bind])).values()].sort((a, b) =>
    a.path < b.path ? -1 : a.path > b.path ? 1 : 0
  )
  // Every mount point is made at once, on the tmpfs, before anything is bound over it (one
  // process each for mkdir and touch: a start on a busy host pays per process).
  const folders = ['dev/shm', 'dev/pts']
  const files = DEVICES.map((name) => `dev/${name}`)
  for (const { path } of binds) {
    if (statSync(path).isDirectory()) folders.push(`.${path}`)
    else {
      folders.push(`.${dirname(path)}`)
      files.push(`.${path}`)
    }
  }
  lines.push(
    `printf '%s' ${quote(plan.account.passwd)} > etc/passwd`,
    `printf '%s' ${quote(plan.account.group)} > etc/group`,
    `${MOUNT} -n -t tmpfs -o mode=1777,nosuid,nodev agent-tmp tmp`,
    `${MOUNT} -n -t tmpfs -o mode=0755,nosuid,noexec agent-dev dev`,
    `mkdir -p ${folders.map(quote).join(' ')}`,
    `touch ${files.map(quote).join(' ')}`,
    'ln -s /proc/self/fd dev/fd',
    'ln -s pts/ptmx dev/ptmx',
    ...['stdin', 'stdout', 'stderr'].map((name, fd) => `ln -s /proc/self/fd/${fd} dev/${name}`),
    ...DEVICES.map((name) => `${MOUNT} -n --bind -o nosuid,noexec /dev/${name} dev/${name}`),
    `${MOUNT} -n -t tmpfs -o mode=1777,nosuid,nodev,noexec agent-shm dev/shm`,
    // Pseudo-terminals of its own (a framework's shell tool may want one), as bubblewrap's --dev.
    `${MOUNT} -n -t devpts -o newinstance,ptmxmode=0666,mode=620,nosuid,noexec agent-pts dev/pts`,
    `${MOUNT} -n -t proc -o nosuid,nodev,noexec agent-proc proc`,
    ...binds.map(
      ({ path, readOnly }) =>
        `${MOUNT} -n --bind -o ${readOnly ? 'ro,nosuid,nodev' : 'nosuid,nodev'} ${quote(path)} ${quote(`.${path}`)}`
    )
  )
  const setpriv = [
    SETPRIV!,
    `--reuid=${plan.uid}`,
    `--regid=${plan.uid}`,
    '--clear-groups',
    '--no-new-privs',
    '--inh-caps=-all',
    '--ambient-caps=-all',
    '--bounding-set=-all',
    ...(plan.seccompFile ? [`--seccomp-filter=${quote(plan.seccompFile)}`] : []),
    '--',
  ]
  lines.push(
    `${PIVOT_ROOT} "$root" "$root/.old-root"`,
    'cd /',
    `${UMOUNT} -n -l /.old-root`,
    'rmdir /.old-root',
    `${MOUNT} -n -o remount,bind,ro,nosuid,nodev /`,
    `cd ${quote(plan.cwd)}`,
    'set +e',
    // As bubblewrap leaves it: PWD is the workspace, nothing else of the setup.
    'PATH="$agent_path"',
    'unset OLDPWD',
    // A session of its own: the supervisor's signal to the group reaches the framework once, from here.
    `${SETSID} ${setpriv.join(' ')} "$@" &`,
    'child=$!',
    ...['TERM', 'INT', 'HUP'].map(
      (signal) => `trap 'kill -${signal} "$child" 2>/dev/null' ${signal}`
    ),
    // wait returns early when a trapped signal arrives: wait again until the framework is gone.
    'while :; do wait "$child"; status=$?; kill -0 "$child" 2>/dev/null || break; done',
    'exit "$status"'
  )
  return lines.join('\n')
}

let availability: { works: boolean; reason?: string } | undefined

/** Whether this mode works here (probed once, by running a sandboxed `true`), or why not. */
export function unshareSandboxAvailability(haveSeccompFilter: boolean): {
  works: boolean
  reason?: string
} {
  if (availability) return availability
  if (process.platform !== 'linux') return (availability = { works: false, reason: 'not Linux' })
  if (process.getuid?.() !== 0) {
    return (availability = { works: false, reason: 'the service does not run as root' })
  }
  const missing = Object.entries({
    unshare: UNSHARE,
    setpriv: SETPRIV,
    setsid: SETSID,
    mount: MOUNT,
    umount: UMOUNT,
    pivot_root: PIVOT_ROOT,
  }).filter(([, path]) => !path)
  if (missing.length) {
    const names = missing.map(([name]) => name).join(', ')
    return (availability = { works: false, reason: `util-linux ${names} not found` })
  }
  const ioUring = ioUringRefusal(haveSeccompFilter)
  if (!ioUring.how) return (availability = { works: false, reason: ioUring.reason })
  const scratch = join(tmpdir(), `agent-host-unshare-probe-${process.pid}`)
  try {
    for (const folder of ['root', 'work']) mkdirSync(join(scratch, folder), { recursive: true })
    const script = initScript({
      binds: [
        { path: '/usr', readOnly: true },
        { path: join(scratch, 'work'), readOnly: false },
      ],
      account: { passwd: 'nobody:x:65534:65534::/:/bin/sh\n', group: 'nobody:x:65534:\n' },
      uid: 65534,
      cwd: join(scratch, 'work'),
    })
    const probe = spawnSync(
      UNSHARE!,
      [...NAMESPACES, SHELL, '-c', script, join(scratch, 'root'), '/usr/bin/true'],
      { encoding: 'utf8', timeout: 10_000 }
    )
    availability =
      probe.status === 0
        ? { works: true }
        : {
            works: false,
            reason: `a trial sandbox failed: ${(probe.stderr || probe.error?.message || `exit ${probe.status}`).trim().slice(0, 300)}`,
          }
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
  return availability
}

let sysctlSaid = false

/**
 * The launch of the agent's framework in this sandbox (run as root: the
 * uid drop happens inside). Call unshareSandboxAvailability first.
 * Returns a note for the service's log the first time it changes the host
 * (kernel.io_uring_disabled).
 */
export async function unshareLaunch(
  request: UnshareSandboxRequest
): Promise<{ command: string; args: string[]; note?: string }> {
  const useSeccomp = ioUringRefusal(request.seccompFile !== undefined).how === 'seccomp'
  let note: string | undefined
  if (!useSeccomp && disableIoUringForUnprivileged('the unshare sandbox') && !sysctlSaid) {
    sysctlSaid = true
    note =
      'set kernel.io_uring_disabled=1 for the unshare sandbox (setpriv has no --seccomp-filter): io_uring now needs CAP_SYS_ADMIN on this host; agents never have it'
  }
  // Where the new root is built, inside the new mount namespace only (an empty folder of the service's).
  const mountDir = join(request.paths.runtime, 'sandbox-mount')
  await mkdir(mountDir, { recursive: true, mode: 0o700 })
  const script = initScript({
    binds: [
      { path: '/usr', readOnly: true },
      ...request.readOnly.map((path) => ({ path, readOnly: true })),
      ...(useSeccomp ? [{ path: request.seccompFile!, readOnly: true }] : []),
      ...request.readWrite.map((path) => ({ path, readOnly: false })),
    ],
    account: request.account,
    uid: request.uid,
    cwd: request.paths.workspace,
    seccompFile: useSeccomp ? request.seccompFile : undefined,
  })
  return {
    command: UNSHARE!,
    args: [
      ...NAMESPACES,
      SHELL,
      '-c',
      script,
      mountDir,
      request.launch.command,
      ...request.launch.args,
    ],
    note,
  }
}
