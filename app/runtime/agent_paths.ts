import { lstat, mkdir, rename } from 'node:fs/promises'
import { basename, join } from 'node:path'
import { ValidationException } from '#core/exceptions/api_exceptions'
import type { AgentFolders } from '#plugins/types'
import { isNotAFolder, PinnedDir, removeIn, type Owner } from '#runtime/files/pinned_dir'

/** Agent ids become folder and container names: letters, digits, `-` and `_` only. */
const AGENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/

export function assertAgentId(agentId: string): void {
  if (!AGENT_ID_PATTERN.test(agentId)) {
    throw new ValidationException(`Invalid agent id "${agentId}"`)
  }
}

/**
 * The service's own files of every agent, `<agents>/.runtime/<id>/`: a
 * folder of the agents folder that no agent id can name (ids never start
 * with a dot), 0700 and the service's. Nothing in it is reachable by any
 * agent (docs/runtime.md "Agent folders").
 */
export const SERVICE_FOLDER = '.runtime'

/** Entries the layout before issue 25 kept in the agent's own folder (then the agent's). */
const LEGACY_SERVICE_ENTRIES = ['runtime', 'sandbox-root', 'sandbox-etc']

/** Everything one agent owns locally. */
export interface AgentPaths extends AgentFolders {
  /** The agents folder: the trusted folder every walk into the agent's folders starts from. */
  agentsDir: string
  /** The runtime's own files (`<agents>/.runtime/<id>`): records, credentials, output, checkpoint. */
  runtime: string
  /** Captured stdout and stderr (size-capped, one rotated file beside it). */
  logFile: string
  /** pid, start time and port of the live process (process driver). */
  recordFile: string
  /** The per-agent gateway token (mode 0600). */
  credentialsFile: string
  /** The CRIU checkpoint of a sleeping agent (process driver). */
  checkpoint: string
  /** Its first start's images, linked to the template they were made of (process driver). */
  templateCopy: string
  /**
   * There while its next start is a new agent's, from its framework's template: its last run
   * started from the template and slept before any turn (process driver).
   */
  startsAsNewFile: string
  /** The root folder of its root-layout sandbox, and the account files of the other layout. */
  sandboxRoot: string
  sandboxEtc: string
  xdgConfig: string
  xdgData: string
  xdgState: string
}

/**
 * Folder layout of one agent. `<agents>/<id>/` is the service's (0711) and
 * holds the agent's own folders: `workspace/` (the file manager's root),
 * `state/` (framework config and data), `home/` (HOME and XDG config/data),
 * `tmp/` (TMPDIR), `cache/` (XDG_CACHE_HOME). The service's files of the
 * agent are in `<agents>/.runtime/<id>/`.
 */
export function agentPaths(agentsDir: string, agentId: string): AgentPaths {
  assertAgentId(agentId)
  const root = join(agentsDir, agentId)
  const home = join(root, 'home')
  const runtime = join(agentsDir, SERVICE_FOLDER, agentId)
  return {
    agentsDir,
    root,
    state: join(root, 'state'),
    workspace: join(root, 'workspace'),
    home,
    tmp: join(root, 'tmp'),
    cache: join(root, 'cache'),
    runtime,
    logFile: join(runtime, 'output.log'),
    recordFile: join(runtime, 'process.json'),
    credentialsFile: join(runtime, 'credentials.json'),
    checkpoint: join(runtime, 'checkpoint'),
    templateCopy: join(runtime, 'template-copy'),
    startsAsNewFile: join(runtime, 'starts-as-new'),
    sandboxRoot: join(runtime, 'sandbox-root'),
    sandboxEtc: join(runtime, 'sandbox-etc'),
    xdgConfig: join(home, '.config'),
    xdgData: join(home, '.local', 'share'),
    xdgState: join(home, '.local', 'state'),
  }
}

function serviceOwner(): Owner {
  return { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 }
}

/**
 * Makes the service's folder of the agent (`<agents>/.runtime/<id>`, 0700).
 * An agent made by an older version kept these files in `<id>/runtime/`:
 * they move here only when the agent could never change them (its folder
 * is the service's: docker and swarm agents, or a service not running as
 * root); otherwise they are left behind unread (ensureAgentFolders removes
 * them) and the credentials and records are made anew.
 */
export async function ensureServiceFolder(paths: AgentPaths): Promise<void> {
  await mkdir(paths.agentsDir, { recursive: true, mode: 0o711 })
  const agents = await PinnedDir.trusted(paths.agentsDir)
  try {
    const service = await agents.child(SERVICE_FOLDER, { mode: 0o700 })
    try {
      const info = await service.stat()
      if (info.mode & 0o077) await service.chmod(0o700)
      const id = basename(paths.root)
      if (!(await lstat(service.path(id)).catch(() => undefined))) {
        await adoptTrustedLegacy(agents, id, service)
      }
      const own = await service.child(id, { mode: 0o700 })
      await own.close()
    } finally {
      await service.close()
    }
  } finally {
    await agents.close()
  }
}

/** Moves `<id>/runtime` of the old layout into the service folder when it was never the agent's. */
async function adoptTrustedLegacy(agents: PinnedDir, id: string, service: PinnedDir) {
  let top: PinnedDir
  try {
    top = await agents.child(id)
  } catch {
    return
  }
  try {
    const owner = serviceOwner()
    const topInfo = await top.stat()
    if (topInfo.uid !== owner.uid) return
    const legacy = await lstat(top.path('runtime')).catch(() => undefined)
    if (!legacy?.isDirectory() || legacy.uid !== owner.uid) return
    await rename(top.path('runtime'), service.path(id)).catch(() => undefined)
  } finally {
    await top.close()
  }
}

/**
 * Creates or repairs the agent's folders (process driver, before every
 * start): `<agents>/<id>` is the service's, 0711 (the agent passes through
 * it to its own folders and can rename nothing in it); an old layout's
 * folder that belonged to the agent is taken back, what the service kept in
 * it is deleted unread, and an own folder the agent replaced by a link or
 * a file is made a folder again. Every step is on pinned descriptors.
 */
export async function ensureAgentFolders(paths: AgentPaths): Promise<void> {
  await ensureServiceFolder(paths)
  const agents = await PinnedDir.trusted(paths.agentsDir)
  let top: PinnedDir
  try {
    top = await agents.child(basename(paths.root), { mode: 0o711 })
  } finally {
    await agents.close()
  }
  try {
    const owner = serviceOwner()
    const info = await top.stat()
    if (info.uid !== owner.uid || info.gid !== owner.gid) await top.chown(owner)
    if ((info.mode & 0o7777) !== 0o711) await top.chmod(0o711)
    for (const name of LEGACY_SERVICE_ENTRIES) {
      // Best effort: nothing reads them any more; an agent still running may refill one.
      await removeIn(top, name).catch(() => undefined)
    }
    for (const name of ['state', 'workspace', 'home', 'tmp', 'cache']) {
      await ensureFolderIn(top, name)
    }
    const home = await top.child('home')
    try {
      for (const path of ['.config', '.local', '.local/share', '.local/state']) {
        const parts = path.split('/')
        const parent = parts.length > 1 ? await home.walk(parts[0]) : home
        try {
          await ensureFolderIn(parent, parts.at(-1)!)
        } finally {
          if (parent !== home) await parent.close()
        }
      }
    } finally {
      await home.close()
    }
  } finally {
    await top.close()
  }
}

/** Makes the folder `name` of `dir` (0700), again when the agent put a link or a file there. */
async function ensureFolderIn(dir: PinnedDir, name: string): Promise<void> {
  let folder: PinnedDir
  try {
    folder = await dir.child(name, { mode: 0o700 })
  } catch (error) {
    if (!isNotAFolder(error)) throw error
    await removeIn(dir, name)
    folder = await dir.child(name, { mode: 0o700 })
  }
  await folder.close()
}

/** Deletes the agent's folders and the service's files of it, never through a link. */
export async function removeAgentFolders(paths: AgentPaths): Promise<void> {
  let agents: PinnedDir
  try {
    agents = await PinnedDir.trusted(paths.agentsDir)
  } catch {
    return
  }
  try {
    const id = basename(paths.root)
    await removeIn(agents, id)
    const service = await agents.child(SERVICE_FOLDER).catch(() => undefined)
    if (service) {
      try {
        await removeIn(service, id)
      } finally {
        await service.close()
      }
    }
  } finally {
    await agents.close()
  }
}
