import type Docker from 'dockerode'
import { agentPaths, removeAgentFolders } from '#runtime/agent_paths'
import { dockerNames, LABELS } from '#runtime/docker/container_spec'
import { DockerDriver, type DockerDriverOptions } from '#runtime/docker/docker_driver'
import type { DockerRecord } from '#runtime/docker/docker_record'
import { ignoreStatus } from '#runtime/docker/engine_calls'
import type {
  ContainerInfo,
  CreateRequest,
  DriverName,
  FoldersUnavailable,
  WorkspaceFiles,
} from '#runtime/types'
import { agentLaunch } from '#runtime/swarm/agent_launch'
import { NodeEngines } from '#runtime/swarm/node_engines'
import { buildServiceSpec, RECORD_LABELS } from '#runtime/swarm/service_spec'
import { PAUSED_LABEL, PENDING, serviceInfo } from '#runtime/swarm/service_info'
import { layoutOf, StateSync, taskOf } from '#runtime/swarm/state_sync'
import { StateStore, type StateDatabase } from '#runtime/swarm/state_store'

export interface SwarmDriverOptions extends DockerDriverOptions {
  /** Host that reaches the routing mesh's published ports (SWARM_PUBLISH_HOST). Default 127.0.0.1. */
  publishHost?: string
  /** SWARM_SLEEP: `stop` (default: scale to 0, a wake boots) or `pause` (freeze the task). */
  sleep?: 'stop' | 'pause'
  /** Where agents' state lives between nodes (PostgreSQL) and the key it is encrypted with. */
  state: {
    db: StateDatabase
    key: Buffer
    snapshotEveryMs?: number
    tickMs?: number
    collectEveryMs?: number
  }
}

function sleep(ms: number) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * The `swarm` driver: each agent is a Docker Swarm service of one replica
 * (`agent-host-<id>`), so the swarm schedules, restarts and limits it, and
 * places it on any node. What the docker driver keeps in a file on the
 * service's host lives on the service itself (labels), so any service
 * instance can drive any agent. Stop and sleep scale it to 0; start scales
 * it to 1. The agent's state is not on a node: each task gets a fresh
 * volume filled from the snapshot store before its framework starts, and
 * ships its state back every 30 s and when it ends (state_sync.ts), so
 * the swarm may start it anywhere, also after losing its node.
 * Container-level calls (files, logs, usage) go to the task's container
 * through its node's engine (node_engines.ts).
 */
export class SwarmDriver extends DockerDriver {
  override readonly name: DriverName = 'swarm'
  readonly #nodes: NodeEngines
  readonly #store: StateStore
  readonly #sync: StateSync
  /** Agents frozen by a warm sleep, as this instance knows (resumes() answers from it). */
  readonly #paused = new Set<string>()

  constructor(protected readonly swarmOptions: SwarmDriverOptions) {
    super(swarmOptions)
    this.#nodes = new NodeEngines(this.engine)
    this.#store = new StateStore(swarmOptions.state.db, swarmOptions.state.key)
    this.#sync = new StateSync({
      manager: this.engine,
      nodes: this.#nodes,
      store: this.#store,
      snapshotEveryMs: swarmOptions.state.snapshotEveryMs,
      tickMs: swarmOptions.state.tickMs,
      collectEveryMs: swarmOptions.state.collectEveryMs,
      log: (message, detail) => this.log(message, detail),
    })
    this.#sync.start()
  }

  #service(agentId: string) {
    return this.engine.getService(dockerNames(agentId).container)
  }

  /** The service as the Engine API describes it (Spec, Version, Endpoint), or undefined. */
  async #inspectService(agentId: string): Promise<any> {
    return ignoreStatus(this.#service(agentId).inspect(), 404)
  }

  /** The service's tasks, newest first (none when it has no service). */
  async #tasks(agentId: string): Promise<any[]> {
    const listed = this.engine.listTasks({ filters: { service: [dockerNames(agentId).container] } })
    const tasks = ((await ignoreStatus(listed, 404)) ?? []) as any[]
    return tasks.sort((a, b) => String(b.CreatedAt).localeCompare(String(a.CreatedAt)))
  }

  /**
   * The container of the task meant to run, else of the newest task that had
   * one (a stopped agent's files), on its node's engine. None: a name that
   * answers 404.
   */
  protected override async containerOf(agentId: string): Promise<Docker.Container> {
    const listed = await this.#tasks(agentId)
    const tasks = listed.map((raw) => taskOf(raw, agentId))
    const task =
      tasks.find((item) => item.desiredState === 'running' && item.containerId) ??
      tasks.find((item) => item.containerId)
    if (!task) return this.engine.getContainer(`${dockerNames(agentId).container}-none`)
    const engine = await this.#nodes.engineOf(task.nodeId)
    return engine.getContainer(task.containerId!)
  }

  protected override async readRecord(agentId: string): Promise<DockerRecord | undefined> {
    const service = await this.#inspectService(agentId)
    if (!service) return undefined
    const labels = service.Spec?.Labels ?? {}
    return {
      ...layoutOf(labels),
      framework: labels[LABELS.framework],
      containerPort: Number(labels[RECORD_LABELS.containerPort]),
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
    const up = existing?.Spec?.Mode?.Replicated?.Replicas === 1
    const frozen = up && Boolean(existing.Spec.Labels?.[PAUSED_LABEL])
    if (up && !frozen) {
      // Running already (another instance started it, or before a restart): adopt it.
      this.watch(agentId, 0)
      return this.inspect(agentId)
    }
    const { launch, argv, files, layout } = await agentLaunch(
      { spec, plugin, gatewayToken, containerId },
      (wanted) => this.resolveImage(wanted),
      this.engine
    )
    if (frozen) {
      // Asleep warm: with the same files its start thaws it; a new config needs a boot.
      const same = await this.#store.withAgent(agentId, { wait: true }, async (state) => {
        return JSON.stringify(state.rendered()) === JSON.stringify(files)
      })
      if (same) {
        this.#paused.add(agentId)
        return this.inspect(agentId)
      }
      await this.stop(agentId)
    }
    // The last task's final writes go to the store before its service (and container) goes.
    await this.#store.withAgent(agentId, { wait: true }, async (state) => {
      await this.#sync.settle(state, layout, { attempts: 3 })
      await state.setRendered(files)
    })
    if (existing) await this.#removeService(agentId)
    await this.engine.createService(
      buildServiceSpec({
        agentId,
        framework: plugin.name,
        launch,
        argv,
        containerPort: plugin.defaultPort,
        statePath: plugin.containerPaths.state,
        workspacePath: plugin.containerPaths.workspace,
        resources: { ...plugin.resources, ...spec.resources },
        maxRestarts: this.options.maxRestarts ?? 5,
        replicas: 0,
        runId: containerId,
      }) as never
    )
    return this.inspect(agentId)
  }

  /**
   * Swarm updates are optimistic: another writer (the reconciler, the
   * engine's own task bookkeeping) may move the service's version between our
   * read and our update, which the engine refuses as "update out of
   * sequence". Read again and retry a few times. `change` answers the new
   * spec, or undefined when there is nothing to change.
   */
  async #update(agentId: string, change: (spec: any) => any): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const service = await this.#inspectService(agentId)
      if (!service) return false
      const spec = change(service.Spec)
      if (!spec) return true
      try {
        await this.#service(agentId).update({ ...spec, version: service.Version.Index })
        return true
      } catch (error) {
        if (attempt >= 5 || !/update out of sequence/i.test(String(error))) throw error
        await sleep(50 * attempt)
      }
    }
  }

  #scale(agentId: string, replicas: 0 | 1) {
    return this.#update(agentId, (spec) =>
      spec.Mode?.Replicated?.Replicas === replicas
        ? undefined
        : { ...spec, Mode: { Replicated: { Replicas: replicas } } }
    )
  }

  /** Labels the service with the task a warm sleep froze (null: none). Tasks are not redeployed. */
  #markPaused(agentId: string, taskId: string | null) {
    return this.#update(agentId, (spec) => {
      const { [PAUSED_LABEL]: current, ...labels } = spec.Labels ?? {}
      if ((current ?? null) === taskId) return undefined
      return { ...spec, Labels: taskId ? { ...labels, [PAUSED_LABEL]: taskId } : labels }
    })
  }

  async #runningTask(agentId: string) {
    const tasks = await this.#tasks(agentId)
    return tasks
      .map((raw) => taskOf(raw, agentId))
      .find(
        (task) => task.desiredState === 'running' && task.state === 'running' && task.containerId
      )
  }

  /**
   * Warm sleep (SWARM_SLEEP=pause): the task's state goes to the store, then
   * its container is frozen (cgroup freezer: no CPU, its memory kept on its
   * node) and the service labelled with it; a wake thaws it in a fraction of
   * a second instead of a boot. Otherwise (default) a sleep is a stop.
   */
  async hibernate(agentId: string): Promise<void> {
    const running =
      this.swarmOptions.sleep === 'pause' ? await this.#runningTask(agentId) : undefined
    const record = await this.readRecord(agentId)
    if (!running || !record) return this.stop(agentId)
    this.unwatch(agentId)
    await this.#store.withAgent(agentId, { wait: true }, (state) =>
      this.#sync.ship(state, running, record)
    )
    const engine = await this.#nodes.engineOf(running.nodeId)
    await engine.getContainer(running.containerId!).pause()
    await this.#markPaused(agentId, running.id)
    this.#paused.add(agentId)
    this.emit({ type: 'stopped', agentId, at: new Date() })
  }

  resumes(agentId: string): boolean {
    return this.#paused.has(agentId)
  }

  /** Thaws the task a warm sleep froze; true when it still ran and goes on now. */
  async #thaw(agentId: string): Promise<boolean> {
    const service = await this.#inspectService(agentId)
    const frozen = service?.Spec?.Labels?.[PAUSED_LABEL]
    this.#paused.delete(agentId)
    if (!frozen) return false
    const running = await this.#runningTask(agentId)
    const thawed = running?.id === frozen
    if (running && thawed) {
      const engine = await this.#nodes.engineOf(running.nodeId)
      await ignoreStatus(engine.getContainer(running.containerId!).unpause(), 404, 409)
    }
    await this.#markPaused(agentId, null)
    return thawed
  }

  override async start(agentId: string): Promise<ContainerInfo> {
    const restored = await this.#thaw(agentId)
    if (!restored && !(await this.#scale(agentId, 1))) {
      throw new Error(`Agent ${agentId} has no swarm service`)
    }
    this.#sync.poke()
    this.watch(agentId, 0)
    const info = await this.inspect(agentId)
    this.emit({
      type: 'started',
      agentId,
      containerId: info.containerId ?? agentId,
      at: new Date(),
      ...(restored ? { restored } : {}),
    })
    return info
  }

  override async stop(agentId: string): Promise<void> {
    this.unwatch(agentId)
    // A frozen framework could not take its SIGTERM.
    await this.#thaw(agentId)
    const before = await this.inspect(agentId)
    if (!(await this.#scale(agentId, 0))) return
    // Scaling down is asynchronous: wait (bounded) until no task runs.
    const running = (task: any) =>
      task.Status?.State === 'running' || PENDING.has(task.Status?.State)
    const graceMs = (this.options.stopGraceMs ?? 10_000) + 10_000
    await this.#until(agentId, (tasks) => !tasks.some(running), graceMs)
    // Its state as it stopped goes to the store: the next start may be on another node.
    const record = await this.readRecord(agentId)
    if (record) {
      await this.#store.withAgent(agentId, { wait: true }, (state) =>
        this.#sync.settle(state, record, { attempts: 3 })
      )
    }
    if (before.state === 'running') this.emit({ type: 'stopped', agentId, at: new Date() })
  }

  async #removeService(agentId: string) {
    // Tasks on their way out (a scale to 0) are reaped first: Engine 20.10's manager, removing a
    // service, dereferences a task the reaper deleted meanwhile, and that panic takes dockerd down.
    const leaving = (task: any) => task.DesiredState === 'remove'
    await this.#until(agentId, (tasks) => !tasks.some(leaving), 10_000)
    await ignoreStatus(this.#service(agentId).remove(), 404)
    // Task containers go away after the service, each on its node.
    await this.#until(agentId, (tasks) => tasks.length === 0, 30_000)
  }

  /** Until `done` says so of the agent's tasks, or `timeoutMs` passed. */
  async #until(agentId: string, done: (tasks: any[]) => boolean, timeoutMs: number) {
    const deadline = Date.now() + timeoutMs
    while (Date.now() < deadline && !done(await this.#tasks(agentId))) await sleep(250)
  }

  override async remove(agentId: string): Promise<void> {
    this.unwatch(agentId)
    await this.#thaw(agentId)
    await this.#removeService(agentId)
    await this.#store.remove(agentId)
    await this.#nodes.removeAgent(agentId)
    await removeAgentFolders(agentPaths(this.options.agentsDir, agentId))
  }

  override async inspect(agentId: string): Promise<ContainerInfo> {
    const service = await this.#inspectService(agentId)
    const tasks = service ? await this.#tasks(agentId) : []
    return serviceInfo(agentId, service, tasks, (nodeId) => this.#nodeAddress(nodeId))
  }

  /** Where a node's published ports are reached: SWARM_PUBLISH_HOST, else the node's address. */
  async #nodeAddress(nodeId: string): Promise<string> {
    if (this.swarmOptions.publishHost) return this.swarmOptions.publishHost
    const node = await this.#nodes.node(nodeId)
    return node?.address ?? '127.0.0.1'
  }

  /**
   * A stopped agent's files are those of its last task's volume: a change
   * there marks its state for the next start to take again.
   */
  override files(agentId: string): WorkspaceFiles {
    const files = super.files(agentId)
    const changed = async <T>(result: T) => {
      const service = await this.#inspectService(agentId)
      if (service?.Spec?.Mode?.Replicated?.Replicas === 0) {
        await this.#store.withAgent(agentId, { wait: true }, (state) => state.dirty())
      }
      return result
    }
    return {
      list: (path) => files.list(path),
      read: (path) => files.read(path),
      write: (path, content) => files.write(path, content).then(changed),
      delete: (path) => files.delete(path).then(changed),
    }
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
      // A frozen task is an agent asleep (SWARM_SLEEP=pause), left as a stopped container is.
      if (service.Spec?.Labels?.[PAUSED_LABEL]) continue
      if (service.Spec?.Mode?.Replicated?.Replicas === 1) {
        await this.stop(agentId)
        stopped.push(agentId)
      }
    }
    return stopped
  }

  override async close(): Promise<void> {
    await this.#sync.close()
    await super.close()
  }
}
