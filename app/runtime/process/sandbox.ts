import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { chmod, stat } from 'node:fs/promises'
import { dirname, isAbsolute } from 'node:path'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import type { AgentPaths } from '#runtime/agent_paths'
import { chownTreeBelow } from '#runtime/files/confined_dir'
import type { ProcessLaunch } from '#plugins/types'
import {
  accountFiles,
  BWRAP,
  bubblewrapLaunch,
  bubblewrapWorks,
} from '#runtime/process/bubblewrap_sandbox'
import { unshareLaunch, unshareSandboxAvailability } from '#runtime/process/unshare_sandbox'

export {
  BWRAP,
  bubblewrapWorks,
  FIXED_FOLDERS,
  fixedLayoutAvailable,
  fixedMounts,
} from '#runtime/process/bubblewrap_sandbox'

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
const PRLIMIT = ['/usr/bin/prlimit', '/bin/prlimit'].find((path) => existsSync(path))

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

  const { args, ...sandbox } = await bubblewrapLaunch({
    paths,
    launch,
    readOnly,
    readWrite: ownFolders(paths),
    account,
    id,
    uid,
    seccompFile: request.seccompFile,
    fixedLayout: request.fixedLayout,
  })
  return { ...limited(BWRAP!, args), ...sandbox, confinement: 'bubblewrap' }
}
