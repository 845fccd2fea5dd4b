import { posix } from 'node:path'
import type Docker from 'dockerode'
import type { RenderedFile } from '#plugins/types'
import { agentPaths, removeAgentFolders } from '#runtime/agent_paths'
import { dockerNames, LABELS } from '#runtime/docker/container_spec'
import { DockerDriver, type DockerDriverOptions } from '#runtime/docker/docker_driver'
import { parseOwner, type DockerRecord } from '#runtime/docker/docker_record'
import { ignoreStatus } from '#runtime/docker/engine_calls'
import { renderedFilesArchive } from '#runtime/docker/rendered_files'
import { statInContainer } from '#runtime/docker/docker_files'
import { renderedSkillFiles } from '#runtime/skill_files'
import type { ContainerInfo, CreateRequest, DriverName, FoldersUnavailable } from '#runtime/types'
import { buildServiceSpec, RECORD_LABELS, SERVICE_NAME_LABEL } from '#runtime/swarm/service_spec'

export interface SwarmDriverOptions extends DockerDriverOptions {
  /** Host that reaches the routing mesh's published ports (SWARM_PUBLISH_HOST). Default 127.0.0.1. */
  publishHost?: string
}

/** Task states on the way to running. */
const PENDING = new Set([
  'new',
  'allocated',
  'pending',
  'assigned',
  'accepted',
  'preparing',
  'ready',
  'starting',
])
const FAILED = new Set(['failed', 'rejected', 'orphaned'])

function sleep(ms: number) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * The `swarm` driver: each agent is a Docker Swarm service of one replica
 * (`agent-host-<id>`), so the swarm schedules, restarts and limits it, on
 * an existing engine spanning many machines. What the docker driver keeps
 * in a file on the service's host lives on the service itself (labels), so
 * any service instance can drive any agent. Stop and sleep scale it to 0
 * (its state volume stays); start scales it to 1. The state volume is made
 * and filled on the node of the engine this service talks to, and the
 * service is pinned there (`node.id==...`): a volume plugin shared by all
 * nodes would let it move (docs/runtime.md). Container-level calls (files,
 * logs, usage) go to the newest task container of the service.
 */
export class SwarmDriver extends DockerDriver {
  override readonly name: DriverName = 'swarm'

  constructor(protected readonly swarmOptions: SwarmDriverOptions) {
    super(swarmOptions)
  }

  #service(agentId: string) {
    return this.engine.getService(dockerNames(agentId).container)
  }

  /** The service as the Engine API describes it (Spec, Version, Endpoint), or undefined. */
  async #inspectService(agentId: string): Promise<any> {
    return ignoreStatus(this.#service(agentId).inspect(), 404)
  }

  async #tasks(agentId: string): Promise<any[]> {
    const tasks = (await this.engine.listTasks({
      filters: { service: [dockerNames(agentId).container] },
    })) as any[]
    return tasks.sort((a, b) => String(b.CreatedAt).localeCompare(String(a.CreatedAt)))
  }

  #prepName(agentId: string) {
    return `${dockerNames(agentId).container}-prep`
  }

  protected override async containerOf(agentId: string): Promise<Docker.Container> {
    const containers = await this.engine.listContainers({
      all: true,
      filters: { label: [`${SERVICE_NAME_LABEL}=${dockerNames(agentId).container}`] },
    })
    const newest = containers.sort((a, b) => b.Created - a.Created)[0]
    // No task yet: the preparation container holds the state volume (or nothing: 404 on use).
    return this.engine.getContainer(newest?.Id ?? this.#prepName(agentId))
  }

  protected override async readRecord(agentId: string): Promise<DockerRecord | undefined> {
    const service = await this.#inspectService(agentId)
    if (!service) return undefined
    const labels = service.Spec?.Labels ?? {}
    return {
      framework: labels[LABELS.framework],
      statePath: labels[RECORD_LABELS.statePath],
      workspacePath: labels[RECORD_LABELS.workspacePath],
      containerPort: Number(labels[RECORD_LABELS.containerPort]),
      owner: parseOwner(labels[RECORD_LABELS.user] || undefined),
      stoppedByUser: service.Spec?.Mode?.Replicated?.Replicas === 0,
    }
  }

  /** The service's labels are the record. */
  protected override async writeRecord(): Promise<void> {}

  override async create({
    spec,
    plugin,
    gatewayToken,
    containerId,
  }: CreateRequest): Promise<ContainerInfo> {
    const agentId = spec.agentId
    const existing = await this.#inspectService(agentId)
    if (existing?.Spec?.Mode?.Replicated?.Replicas === 1) {
      // Running already (another instance started it, or before a restart): adopt it.
      this.watch(agentId, 0)
      return this.inspect(agentId)
    }
    if (existing) await this.#removeService(agentId)

    const context = {
      agentId,
      config: spec.config,
      modelProxy: spec.modelProxy,
      // Plugins see a container (listen on 0.0.0.0, container paths), as with docker.
      driver: 'docker' as const,
      port: plugin.defaultPort,
      gatewayToken,
      paths: plugin.containerPaths,
    }
    const launch = await this.resolveImage(plugin.containerLaunch(context))
    const owner = parseOwner(launch.user)
    await this.ensureVolume(agentId)

    // The rendered files go into the state volume through a container that never starts.
    const prep = await this.#prepContainer(agentId, launch.image, plugin.containerPaths.state)
    const files: RenderedFile[] = []
    for (const file of [
      ...(await plugin.renderFiles(context)),
      ...renderedSkillFiles(plugin, spec.skills),
    ]) {
      if (file.onlyIfMissing) {
        const base =
          file.root === 'state' ? plugin.containerPaths.state : plugin.containerPaths.workspace
        if (await statInContainer(prep, posix.join(base, file.path))) continue
      }
      files.push(file)
    }
    await prep.putArchive(renderedFilesArchive(files, plugin.containerPaths, owner), {
      path: plugin.containerPaths.state,
    })

    const info = (await this.engine.info()) as { Swarm?: { NodeID?: string } }
    const nodeId = info.Swarm?.NodeID
    if (!nodeId) throw new Error('This Docker engine is not part of a swarm (docker swarm init)')
    await this.engine.createService(
      buildServiceSpec({
        agentId,
        framework: plugin.name,
        launch,
        containerPort: plugin.defaultPort,
        statePath: plugin.containerPaths.state,
        workspacePath: plugin.containerPaths.workspace,
        resources: { ...plugin.resources, ...spec.resources },
        maxRestarts: this.options.maxRestarts ?? 5,
        constraints: [`node.id==${nodeId}`],
        replicas: 0,
        runId: containerId,
      }) as never
    )
    return this.inspect(agentId)
  }

  async #prepContainer(agentId: string, image: string, statePath: string) {
    const name = this.#prepName(agentId)
    await ignoreStatus(this.engine.getContainer(name).remove({ force: true }), 404)
    return this.engine.createContainer({
      name,
      Image: image,
      Labels: { [LABELS.managed]: 'true', [LABELS.agentId]: agentId },
      HostConfig: {
        Mounts: [{ Type: 'volume', Source: dockerNames(agentId).volume, Target: statePath }],
        NetworkMode: 'none',
      },
    })
  }

  /**
   * Swarm updates are optimistic: another writer (the reconciler, the
   * engine's own task bookkeeping) may move the service's version between our
   * read and our update, which the engine refuses as "update out of
   * sequence". Read again and retry a few times.
   */
  async #scale(agentId: string, replicas: 0 | 1) {
    for (let attempt = 1; ; attempt++) {
      const service = await this.#inspectService(agentId)
      if (!service) return false
      if (service.Spec.Mode?.Replicated?.Replicas === replicas) return true
      try {
        await this.#service(agentId).update({
          ...service.Spec,
          version: service.Version.Index,
          Mode: { Replicated: { Replicas: replicas } },
        })
        return true
      } catch (error) {
        if (attempt >= 5 || !/update out of sequence/i.test(String(error))) throw error
        await sleep(50 * attempt)
      }
    }
  }

  override async start(agentId: string): Promise<ContainerInfo> {
    if (!(await this.#scale(agentId, 1))) {
      throw new Error(`Agent ${agentId} has no swarm service`)
    }
    this.watch(agentId, 0)
    const info = await this.inspect(agentId)
    this.emit({
      type: 'started',
      agentId,
      containerId: info.containerId ?? agentId,
      at: new Date(),
    })
    return info
  }

  override async stop(agentId: string): Promise<void> {
    this.unwatch(agentId)
    const before = await this.inspect(agentId)
    if (!(await this.#scale(agentId, 0))) return
    // Scaling down is asynchronous: wait (bounded) until no task runs.
    const deadline = Date.now() + (this.options.stopGraceMs ?? 10_000) + 10_000
    while (Date.now() < deadline) {
      const tasks = await this.#tasks(agentId)
      if (
        !tasks.some((task) => task.Status?.State === 'running' || PENDING.has(task.Status?.State))
      )
        break
      await sleep(250)
    }
    if (before.state === 'running') this.emit({ type: 'stopped', agentId, at: new Date() })
  }

  async #removeService(agentId: string) {
    await ignoreStatus(this.#service(agentId).remove(), 404)
    // Task containers go away after the service: the volume is free only then.
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline) {
      const left = await this.engine.listContainers({
        all: true,
        filters: { label: [`${SERVICE_NAME_LABEL}=${dockerNames(agentId).container}`] },
      })
      if (left.length === 0) return
      await sleep(250)
    }
  }

  override async remove(agentId: string): Promise<void> {
    this.unwatch(agentId)
    await this.#removeService(agentId)
    await ignoreStatus(
      this.engine.getContainer(this.#prepName(agentId)).remove({ force: true }),
      404
    )
    await ignoreStatus(this.engine.getVolume(dockerNames(agentId).volume).remove(), 404)
    await removeAgentFolders(agentPaths(this.options.agentsDir, agentId))
  }

  override async inspect(agentId: string): Promise<ContainerInfo> {
    const service = await this.#inspectService(agentId)
    const base: ContainerInfo = {
      agentId,
      driver: 'swarm',
      state: 'absent',
      containerId: null,
      framework: service?.Spec?.Labels?.[LABELS.framework] ?? null,
      baseUrl: null,
      startedAt: null,
      restartCount: 0,
      lastError: null,
    }
    if (!service) return base
    if (service.Spec.Mode?.Replicated?.Replicas === 0) return { ...base, state: 'stopped' }

    const tasks = await this.#tasks(agentId)
    const failures = tasks.filter((task) => FAILED.has(task.Status?.State))
    const lastError = failures[0]?.Status?.Err ?? failures[0]?.Status?.Message ?? null
    const current = tasks.find((task) => task.DesiredState === 'running')
    const restartCount = failures.length
    if (current?.Status?.State === 'running') {
      const published = current.Status.PortStatus?.Ports?.[0]?.PublishedPort
      return {
        ...base,
        state: 'running',
        containerId:
          service.Spec.Labels?.[LABELS.runId] ??
          current.Status.ContainerStatus?.ContainerID ??
          current.ID,
        baseUrl: published
          ? `http://${await this.#nodeAddress(current.NodeID)}:${published}`
          : null,
        startedAt: current.Status.Timestamp ? new Date(current.Status.Timestamp) : null,
        restartCount,
        lastError,
      }
    }
    if (current && PENDING.has(current.Status?.State)) {
      return {
        ...base,
        // The run scheduled has its id before its task runs.
        containerId: service.Spec.Labels?.[LABELS.runId] ?? null,
        state: restartCount > 0 ? 'restarting' : 'starting',
        restartCount,
        lastError,
      }
    }
    // No task meant to run: the swarm gave up restarting it.
    return { ...base, state: failures.length > 0 ? 'error' : 'starting', restartCount, lastError }
  }

  /** Where a node's published ports are reached: SWARM_PUBLISH_HOST, else the node's address. */
  async #nodeAddress(nodeId: string): Promise<string> {
    if (this.swarmOptions.publishHost) return this.swarmOptions.publishHost
    const node = await ignoreStatus(this.engine.getNode(nodeId).inspect(), 404)
    const address = (node as { Status?: { Addr?: string } } | undefined)?.Status?.Addr
    return address && address !== '0.0.0.0' ? address : '127.0.0.1'
  }

  /** Its volume lies on whichever node runs its task: no backup copies it from here. */
  override async hostFolders(): Promise<FoldersUnavailable> {
    return { unavailable: "swarm keeps each agent's volume on the node that runs it" }
  }

  override async whileFrozen(): Promise<undefined> {
    return undefined
  }

  override async sweep(keepAgentIds: string[]): Promise<string[]> {
    const keep = new Set(keepAgentIds)
    const services = (await this.engine.listServices({
      filters: { label: [`${LABELS.managed}=true`] },
    })) as any[]
    const stopped: string[] = []
    for (const service of services) {
      const agentId = service.Spec?.Labels?.[LABELS.agentId]
      if (!agentId || keep.has(agentId)) continue
      if (service.Spec?.Mode?.Replicated?.Replicas === 1) {
        await this.stop(agentId)
        stopped.push(agentId)
      }
    }
    return stopped
  }
}
