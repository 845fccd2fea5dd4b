import { existsSync } from 'node:fs'
import { posix } from 'node:path'
import type Docker from 'dockerode'
import { dockerNames } from '#runtime/docker/container_spec'
import type { DockerRecord } from '#runtime/docker/docker_record'
import { ignoreStatus } from '#runtime/docker/engine_calls'
import type { FoldersUnavailable, HostFolders } from '#runtime/types'

/**
 * A docker agent's folders for a backup (docs/backups.md "Docker"): its
 * state volume as this host sees it, and the engine's pause as the quiesce.
 *
 * The volume is read and written on the host only when that is its own
 * disk and nothing but the engine decides where it lies: the engine is
 * reached through a local socket, the volume has the `local` driver
 * without options (no NFS or bind device), and its mount point is a folder
 * of this host inside the engine's root folder, with the service running as
 * root. The mount point (`<docker root>/volumes/<name>/_data`) is the
 * engine's, never the agent's: the agent only sees inside it, where the
 * backup walks without following links as everywhere else. Otherwise
 * (a remote engine, another volume driver, swarm) the answer says why.
 */

interface EngineInfo {
  DockerRootDir?: string
  SecurityOptions?: string[]
}

let engineInfo: Promise<EngineInfo> | undefined

/** The engine's root folder and security options, asked once. */
function engine(docker: Docker): Promise<EngineInfo> {
  engineInfo ??= docker.info().then(
    (info: EngineInfo) => info,
    () => ({})
  )
  return engineInfo
}

function unavailable(reason: string, untilCreated = false): FoldersUnavailable {
  return { unavailable: reason, untilCreated }
}

export async function volumeHostFolders(
  docker: Docker,
  agentId: string,
  record: DockerRecord | undefined
): Promise<HostFolders | FoldersUnavailable> {
  const modem = docker.modem as { socketPath?: string; host?: string }
  if (!modem.socketPath || modem.host) {
    return unavailable('its Docker engine is reached over the network, not on this host')
  }
  if (process.getuid?.() !== 0) {
    return unavailable('the service does not run as root, so it cannot read container volumes')
  }
  const volume = await ignoreStatus(docker.getVolume(dockerNames(agentId).volume).inspect(), 404)
  // Which of the two is missing says where to look when a running agent answers this.
  if (!record) return unavailable('the agent has no container yet (no driver record)', true)
  if (!volume) return unavailable('the agent has no container yet (no state volume)', true)
  if (volume.Driver !== 'local' || Object.keys(volume.Options ?? {}).length > 0) {
    return unavailable(`its volume's driver (${volume.Driver}) keeps it off this host's disk`)
  }
  const { DockerRootDir: root, SecurityOptions: security } = await engine(docker)
  // With user namespaces the container's users are other uids on the host.
  if (security?.some((option) => option.includes('name=userns'))) {
    return unavailable('its Docker engine remaps users (userns-remap)')
  }
  const mountpoint = volume.Mountpoint
  if (!root || !mountpoint.startsWith(`${root}/volumes/`) || !existsSync(mountpoint)) {
    return unavailable("its volume's folder is not on this host's disk")
  }
  const workspace = posix.relative(record.statePath, record.workspacePath)
  if (!workspace || workspace.startsWith('..')) {
    return unavailable('its workspace is not inside its state volume')
  }
  return { root: mountpoint, folders: { state: '', workspace }, owner: record.owner }
}

/**
 * Runs `work` with the container paused (the engine freezes its processes
 * with the cgroup freezer) and unpaused after, whatever happens; undefined,
 * `work` not run, when it is not running.
 */
export async function whilePaused<T>(
  container: Docker.Container,
  work: () => Promise<T>
): Promise<{ value: T } | undefined> {
  const inspected = await ignoreStatus(container.inspect(), 404)
  if (!inspected?.State.Running || inspected.State.Paused) return undefined
  await container.pause()
  try {
    return { value: await work() }
  } finally {
    await container.unpause()
  }
}
