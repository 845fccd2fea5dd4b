import { existsSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import Docker from 'dockerode'
import { AgentNotRunningException, NotFoundException } from '#core/exceptions/api_exceptions'
import type { AgentFileReader, ContainerLaunch, FrameworkPlugin } from '#plugins/types'
import { agentPaths, removeAgentFolders } from '#runtime/agent_paths'
import { containerInfo } from '#runtime/docker/container_info'
import { buildContainerSpec, dockerNames, LABELS } from '#runtime/docker/container_spec'
import { ContainerWatch } from '#runtime/docker/container_watch'
import {
  lazyAgentReader,
  lazyWorkspaceFiles,
  type ContainerLoader,
} from '#runtime/docker/docker_files'
import { DockerImages, type ImageSource } from '#runtime/docker/docker_images'
import {
  parseOwner,
  readDockerRecord,
  writeDockerRecord,
  type DockerRecord,
} from '#runtime/docker/docker_record'
import { usageFromDockerStats } from '#runtime/docker/docker_stats'
import { containerLogs, followContainerLogs } from '#runtime/docker/docker_streams'
import { ignoreStatus } from '#runtime/docker/engine_calls'
import { IoUringRefusal } from '#runtime/docker/io_uring_refusal'
import { AgentNetworkGuard } from '#runtime/docker/agent_network'
import { putRenderedFiles, syncSkillsInContainer } from '#runtime/docker/rendered_files'
import { volumeHostFolders, whilePaused } from '#runtime/docker/volume_folders'
import { renderedSkillFiles } from '#runtime/skill_files'
import { RuntimeEventFanOut } from '#runtime/runtime_events'
import type {
  ContainerDriver,
  ContainerInfo,
  ContainerUsage,
  CreateRequest,
  DriverName,
  FoldersUnavailable,
  HostFolders,
  RuntimeEvent,
  RuntimeEventListener,
  SkillChange,
  WorkspaceFiles,
} from '#runtime/types'

export type { ImageSource } from '#runtime/docker/docker_images'

export interface DockerDriverOptions {
  /** `<storage>/agents`: the driver keeps a small record per agent there. */
  agentsDir: string
  /** Engine client; default: DOCKER_HOST or the local socket. */
  docker?: Docker
  /** Seconds Docker waits between SIGTERM and SIGKILL, in ms. Default 10 s. */
  stopGraceMs?: number
  /** Crash restarts Docker makes before the container stays down (`error`). Default 5. */
  maxRestarts?: number
  /** How often running agents are inspected for restarts and failures. Default 5 s. */
  pollIntervalMs?: number
  log?: (message: string, detail?: Record<string, unknown>) => void
  /**
   * AGENT_IMAGES: `auto` (default: the official image, pulled when missing;
   * built locally from the plugin's recipe when the pull fails), `registry`
   * (never build), `local` (always the locally built image).
   */
  images?: ImageSource
  /** `<storage>/runtime`: the npm cache local images take framework packages from. */
  cacheDir?: string
}

/**
 * The `docker` driver: one container per agent from the framework's pinned
 * image, through the Engine API (DOCKER_HOST or /var/run/docker.sock). The
 * container, its state volume and its network are named after the agent
 * (`agent-host-<id>`) and labelled; see buildContainerSpec for the limits
 * and hardening. Docker restarts crashed containers (on-failure, bounded);
 * this driver polls them for restarts and failures to emit events.
 *
 * Its parts (app/runtime/docker/): images (docker_images.ts, local_images.ts),
 * the container's spec and what its inspection says (container_spec.ts,
 * container_info.ts), rendered files (rendered_files.ts), the record
 * (docker_record.ts), logs (docker_streams.ts), the watch for restarts
 * (container_watch.ts), the agent's network (agent_network.ts).
 */
export class DockerDriver implements ContainerDriver {
  readonly name: DriverName = 'docker'
  readonly #docker: Docker
  readonly #events = new RuntimeEventFanOut((error) =>
    this.log(`runtime event listener failed: ${error.message}`)
  )
  readonly #watch: ContainerWatch
  readonly #images: DockerImages
  readonly #ioUring: IoUringRefusal

  readonly #network: AgentNetworkGuard

  constructor(protected readonly options: DockerDriverOptions) {
    this.#docker = options.docker ?? new Docker()
    const log = (message: string) => this.log(message)
    this.#network = new AgentNetworkGuard(this.#docker, log)
    this.#images = new DockerImages(this.#docker, { ...options, log })
    this.#ioUring = new IoUringRefusal(this.#docker, log)
    this.#watch = new ContainerWatch({
      inspect: (agentId) => this.inspect(agentId),
      emit: (event) => this.emit(event),
      log,
      intervalMs: options.pollIntervalMs ?? 5000,
    })
  }

  /** The Engine API client (for drivers built on this one). */
  protected get engine(): Docker {
    return this.#docker
  }

  protected unwatch(agentId: string) {
    this.#watch.unwatch(agentId)
  }

  protected log(message: string, detail?: Record<string, unknown>) {
    this.options.log?.(message, detail)
  }

  protected emit(event: RuntimeEvent) {
    this.#events.emit(event)
  }

  onEvent(listener: RuntimeEventListener): () => void {
    return this.#events.onEvent(listener)
  }

  protected async readRecord(agentId: string): Promise<DockerRecord | undefined> {
    return readDockerRecord(this.options.agentsDir, agentId)
  }

  protected async writeRecord(agentId: string, record: DockerRecord) {
    await writeDockerRecord(this.options.agentsDir, agentId, record)
  }

  /** The agent's container (it may not exist: calls on it then fail with 404). */
  protected async containerOf(agentId: string): Promise<Docker.Container> {
    return this.#docker.getContainer(dockerNames(agentId).container)
  }

  async #inspectContainer(agentId: string): Promise<Docker.ContainerInspectInfo | undefined> {
    const container = await this.containerOf(agentId)
    return ignoreStatus(container.inspect(), 404)
  }

  /** The launch to run: the official image, or the locally built one when it cannot be pulled. */
  protected async resolveImage(launch: ContainerLaunch): Promise<ContainerLaunch> {
    return this.#images.resolve(launch)
  }

  async #ensureNetwork(agentId: string) {
    const name = dockerNames(agentId).network
    if (await ignoreStatus(this.#docker.getNetwork(name).inspect(), 404)) {
      // Rules live in the kernel, not the engine: renewed on every start (after a reboot too).
      await this.#network.confine(agentId)
      return
    }
    await ignoreStatus(
      this.#docker.createNetwork({
        Name: name,
        Driver: 'bridge',
        Options: this.#network.networkOptions(agentId),
        Labels: { [LABELS.managed]: 'true', [LABELS.agentId]: agentId },
      }),
      409
    )
    await this.#network.confine(agentId)
  }

  protected async ensureVolume(agentId: string) {
    const name = dockerNames(agentId).volume
    if (await ignoreStatus(this.#docker.getVolume(name).inspect(), 404)) return
    await this.#docker.createVolume({
      Name: name,
      Labels: { [LABELS.managed]: 'true', [LABELS.agentId]: agentId },
    })
  }

  async create({ spec, plugin, gatewayToken, containerId }: CreateRequest): Promise<ContainerInfo> {
    const agentId = spec.agentId
    await mkdir(agentPaths(this.options.agentsDir, agentId).runtime, {
      recursive: true,
      mode: 0o700,
    })
    const current = await this.#inspectContainer(agentId)
    // The service's loopback is not the container's: agents reach the model proxy through a relay.
    const proxy = await this.#network.modelProxyFor(spec.modelProxy.baseUrl)
    const context = {
      agentId,
      config: spec.config,
      modelProxy: { ...spec.modelProxy, baseUrl: proxy.baseUrl },
      driver: 'docker' as const,
      port: plugin.defaultPort,
      gatewayToken,
      paths: plugin.containerPaths,
    }
    const record = (user: string | undefined): DockerRecord => ({
      framework: plugin.name,
      statePath: plugin.containerPaths.state,
      workspacePath: plugin.containerPaths.workspace,
      containerPort: plugin.defaultPort,
      owner: parseOwner(user),
      stoppedByUser: true,
    })

    if (current?.State.Running) {
      // A container from before the service restarted: adopt it as it is (unpaused: a
      // service that died during a backup's copy left it paused).
      if (current.State.Paused) await this.#docker.getContainer(current.Id).unpause()
      const adopted = record(current.Config.User)
      await this.writeRecord(agentId, { ...adopted, stoppedByUser: false })
      this.watch(agentId, current.RestartCount)
      return containerInfo(agentId, current, adopted)
    }
    if (current) {
      const previous = await this.containerOf(agentId)
      await previous.remove({ force: true })
    }

    await this.#ioUring.ensure()
    const launch = await this.resolveImage(plugin.containerLaunch(context))
    const created = record(launch.user)
    await this.#ensureNetwork(agentId)
    await this.ensureVolume(agentId)
    const container = await this.#docker.createContainer(
      buildContainerSpec({
        agentId,
        framework: plugin.name,
        launch,
        containerPort: plugin.defaultPort,
        statePath: plugin.containerPaths.state,
        resources: { ...plugin.resources, ...spec.resources },
        maxRestarts: this.options.maxRestarts ?? 5,
        extraHosts: proxy.extraHosts,
        runId: containerId,
      })
    )
    await putRenderedFiles(
      container,
      [...(await plugin.renderFiles(context)), ...renderedSkillFiles(plugin, spec.skills)],
      plugin.containerPaths,
      created
    )
    await this.writeRecord(agentId, created)
    return this.inspect(agentId)
  }

  async start(agentId: string): Promise<ContainerInfo> {
    const record = await this.readRecord(agentId)
    if (!record || !(await this.#inspectContainer(agentId))) {
      throw new NotFoundException(`Agent ${agentId} has no container`)
    }
    const container = await this.containerOf(agentId)
    await ignoreStatus(container.start(), 304)
    await this.writeRecord(agentId, { ...record, stoppedByUser: false })
    const info = await this.inspect(agentId)
    if (info.containerId) {
      this.emit({ type: 'started', agentId, containerId: info.containerId, at: new Date() })
    }
    this.watch(agentId, info.restartCount)
    return info
  }

  async stop(agentId: string): Promise<void> {
    const record = await this.readRecord(agentId)
    if (record) await this.writeRecord(agentId, { ...record, stoppedByUser: true })
    this.#watch.unwatch(agentId)
    const current = await this.#inspectContainer(agentId)
    if (!current) return
    const container = await this.containerOf(agentId)
    await ignoreStatus(
      container.stop({ t: Math.ceil((this.options.stopGraceMs ?? 10_000) / 1000) }),
      304,
      404
    )
    if (current.State.Running) this.emit({ type: 'stopped', agentId, at: new Date() })
  }

  async remove(agentId: string): Promise<void> {
    await this.stop(agentId)
    const names = dockerNames(agentId)
    const container = await this.containerOf(agentId)
    await ignoreStatus(container.remove({ force: true }), 404)
    await ignoreStatus(this.#docker.getVolume(names.volume).remove(), 404)
    await ignoreStatus(this.#docker.getNetwork(names.network).remove(), 404)
    await this.#network.release(agentId)
    await removeAgentFolders(agentPaths(this.options.agentsDir, agentId))
  }

  async inspect(agentId: string): Promise<ContainerInfo> {
    const [container, record] = await Promise.all([
      this.#inspectContainer(agentId),
      this.readRecord(agentId),
    ])
    if (container) return containerInfo(agentId, container, record)
    return {
      agentId,
      driver: 'docker',
      state: existsSync(agentPaths(this.options.agentsDir, agentId).runtime) ? 'stopped' : 'absent',
      containerId: null,
      framework: record?.framework ?? null,
      baseUrl: null,
      startedAt: null,
      restartCount: 0,
      lastError: null,
    }
  }

  async usage(agentId: string): Promise<ContainerUsage> {
    const inspected = await this.#inspectContainer(agentId)
    if (!inspected?.State.Running) throw new AgentNotRunningException()
    const container = await this.containerOf(agentId)
    const stats = await container.stats({ stream: false })
    return usageFromDockerStats(stats, inspected.HostConfig.Memory ?? undefined)
  }

  async logs(agentId: string, tail: number): Promise<string[]> {
    if (!(await this.#inspectContainer(agentId))) return []
    return containerLogs(await this.containerOf(agentId), tail)
  }

  async *followLogs(agentId: string, options: { tail?: number; signal?: AbortSignal }) {
    yield* followContainerLogs(await this.containerOf(agentId), options)
  }

  #requireRecord(record: DockerRecord | undefined, agentId: string): DockerRecord {
    if (!record) throw new NotFoundException(`Agent ${agentId} has no container`)
    return record
  }

  /** Record and container are looked up on first use: files() and reader() stay synchronous. */
  #lazy(agentId: string): ContainerLoader {
    let loaded: ReturnType<ContainerLoader> | undefined
    return () =>
      (loaded ??= Promise.all([this.containerOf(agentId), this.readRecord(agentId)]).then(
        ([container, found]) => ({ container, record: this.#requireRecord(found, agentId) })
      ))
  }

  files(agentId: string): WorkspaceFiles {
    return lazyWorkspaceFiles(this.#lazy(agentId))
  }

  async syncSkills(agentId: string, plugin: FrameworkPlugin, change: SkillChange): Promise<void> {
    const record = await this.readRecord(agentId)
    const current = await this.#inspectContainer(agentId)
    // No container yet: the skills are rendered when it is created.
    if (!record || !current) return
    const container = await this.containerOf(agentId)
    await syncSkillsInContainer(container, record, current.State.Running, plugin, change)
  }

  reader(agentId: string): AgentFileReader {
    return lazyAgentReader(this.#lazy(agentId))
  }

  /** A backup's quiesce: the engine's pause (volume_folders.ts). */
  async whileFrozen<T>(agentId: string, work: () => Promise<T>) {
    return whilePaused(await this.containerOf(agentId), work)
  }

  /** The state volume on this host's disk, when it is (volume_folders.ts). */
  async hostFolders(agentId: string): Promise<HostFolders | FoldersUnavailable> {
    return volumeHostFolders(this.#docker, agentId, await this.readRecord(agentId))
  }

  protected watch(agentId: string, restartCount: number) {
    this.#watch.watch(agentId, restartCount)
  }

  async sweep(keepAgentIds: string[]): Promise<string[]> {
    const keep = new Set(keepAgentIds)
    const containers = await this.#docker.listContainers({
      all: true,
      filters: { label: [`${LABELS.managed}=true`] },
    })
    const stopped: string[] = []
    for (const container of containers) {
      const agentId = container.Labels?.[LABELS.agentId]
      if (!agentId || keep.has(agentId)) continue
      if (container.State === 'running' || container.State === 'restarting') {
        await this.stop(agentId)
        stopped.push(agentId)
      }
    }
    return stopped
  }

  async close(): Promise<void> {
    await this.#network.close()
    this.#watch.close()
  }
}

/** True when an engine is reachable by configuration (DOCKER_HOST or the default socket). */
export function dockerConfigured(): boolean {
  return Boolean(process.env.DOCKER_HOST) || existsSync('/var/run/docker.sock')
}
