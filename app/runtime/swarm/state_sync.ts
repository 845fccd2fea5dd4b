import type Docker from 'dockerode'
import { LABELS } from '#runtime/docker/container_spec'
import { parseOwner, type DockerRecord } from '#runtime/docker/docker_record'
import { ignoreStatus } from '#runtime/docker/engine_calls'
import { putRenderedFiles } from '#runtime/docker/rendered_files'
import { createTar, parseTar } from '#runtime/files/tar'
import { inTime, NodeSilent, removeVolume, type NodeEngines } from '#runtime/swarm/node_engines'
import { GATE_FILE, RECORD_LABELS, taskVolumeName } from '#runtime/swarm/service_spec'
import type { AgentState, StateStore } from '#runtime/swarm/state_store'

/** One task of an agent's service, as the manager lists it. */
export interface AgentTask {
  id: string
  agentId: string
  nodeId: string
  containerId: string | null
  state: string
  desiredState: string
  createdAt: string
}

/** Where an agent's state sits in its containers (the service's labels). */
export type StateLayout = Pick<DockerRecord, 'statePath' | 'workspacePath' | 'owner'>

export interface StateSyncOptions {
  manager: Docker
  nodes: NodeEngines
  store: StateStore
  /** How often a running agent's state is shipped to the store. Default 30 s (at most 60). */
  snapshotEveryMs?: number
  /** How often tasks are looked at (gates to open, snapshots due). Default 1 s. */
  tickMs?: number
  /** How often volumes of tasks no longer needed are removed from the nodes. Default 60 s. */
  collectEveryMs?: number
  log: (message: string, detail?: Record<string, unknown>) => void
}

/** How long snapshots skip a node whose engine did not answer. */
const UNREACHABLE_PAUSE_MS = 30_000
const GC_EVERY_MS = 60_000
/** The clean-up's key among the steps under way (no agent has this id). */
const COLLECTING = 'volume clean-up'
/** Periodic snapshots under way at once (each reads a whole state volume). */
const MAX_SHIPPING = 4

export function taskOf(raw: any, agentId: string): AgentTask {
  return {
    id: raw.ID,
    agentId,
    nodeId: raw.NodeID,
    containerId: raw.Status?.ContainerStatus?.ContainerID || null,
    state: raw.Status?.State,
    desiredState: raw.DesiredState,
    createdAt: String(raw.CreatedAt),
  }
}

export function layoutOf(labels: Record<string, string>): StateLayout {
  return {
    statePath: labels[RECORD_LABELS.statePath],
    workspacePath: labels[RECORD_LABELS.workspacePath],
    owner: parseOwner(labels[RECORD_LABELS.user] || undefined),
  }
}

/**
 * Moves swarm agents' state between nodes (docs/runtime.md "Many
 * machines"). Every task of an agent gets a fresh volume and starts behind a
 * gate: its framework waits until the volume holds the agent's state. This
 * opens the gate of each new running task: the newest snapshot from the
 * store, then the rendered files, then the gate file naming the task. A
 * running agent's state is shipped to the store every `snapshotEveryMs`,
 * and once more when its task ends on a node still reachable (a stop, a
 * sleep, a crash restart), so a node loss costs at most the writes since the
 * last snapshot. Each step holds the agent's row in PostgreSQL: any number
 * of service instances run this loop, and one of them does each step once.
 * Only the task the swarm wants running is ever released: a task of a node
 * that comes back after its agent moved never gets its gate opened.
 */
export class StateSync {
  #timer?: NodeJS.Timeout
  #ticking?: Promise<void>
  #lastGc = 0
  readonly #busy = new Set<string>()
  /** Tasks this instance saw released, and when each agent's state was last shipped. */
  readonly #released = new Set<string>()
  readonly #shippedAt = new Map<string, number>()
  /** Steps under way, snapshots among them, and nodes whose engine stopped answering (until when). */
  readonly #steps = new Set<Promise<void>>()
  #shipping = 0
  readonly #unreachable = new Map<string, number>()

  constructor(private readonly options: StateSyncOptions) {}

  get #every() {
    return Math.min(this.options.snapshotEveryMs ?? 30_000, 60_000)
  }

  start() {
    if (this.#timer) return
    this.#timer = setInterval(() => this.poke(), this.options.tickMs ?? 1000)
    this.#timer.unref()
  }

  /** Looks at the tasks now (a start was just asked for). */
  poke() {
    this.#ticking ??= this.#tick()
      .catch((error) => this.options.log('swarm state: tick failed', { error: String(error) }))
      .finally(() => (this.#ticking = undefined))
  }

  async close() {
    clearInterval(this.#timer)
    this.#timer = undefined
    await this.#ticking
    await Promise.all(this.#steps)
  }

  /** The agents' services (id -> agent and layout) and the tasks meant to run. */
  async #running(): Promise<Array<{ task: AgentTask; layout: StateLayout }>> {
    const services = (await this.options.manager.listServices({
      filters: { label: [`${LABELS.managed}=true`] },
    })) as any[]
    const byId = new Map(services.map((service) => [service.ID, service.Spec?.Labels ?? {}]))
    const tasks = (await this.options.manager.listTasks({
      filters: { 'desired-state': ['running'] },
    })) as any[]
    const found = []
    for (const raw of tasks) {
      const labels = byId.get(raw.ServiceID)
      if (!labels?.[LABELS.agentId]) continue
      found.push({ task: taskOf(raw, labels[LABELS.agentId]), layout: layoutOf(labels) })
    }
    return found
  }

  async #tick() {
    for (const { task, layout } of await this.#running()) {
      if (task.state !== 'running' || !task.containerId || this.#busy.has(task.agentId)) continue
      if (!this.#released.has(task.id)) {
        // Never waits behind snapshots: after a node loss its agents' gates open at once.
        this.#launch(task.agentId, () => this.release(task, layout))
      } else if (
        Date.now() - (this.#shippedAt.get(task.agentId) ?? 0) >= this.#every &&
        this.#shipping < MAX_SHIPPING &&
        (this.#unreachable.get(task.nodeId) ?? 0) < Date.now()
      ) {
        this.#shipping++
        this.#launch(task.agentId, () => this.#ship(task, layout).finally(() => this.#shipping--))
      }
    }
    if (Date.now() - this.#lastGc >= (this.options.collectEveryMs ?? GC_EVERY_MS)) {
      this.#lastGc = Date.now()
      // In the background too: a node lost a moment ago must not hold up the gates.
      if (!this.#busy.has(COLLECTING)) this.#launch(COLLECTING, () => this.#collect())
    }
  }

  /** One agent's step, in the background (the tick goes on listing tasks every second). */
  #launch(agentId: string, step: () => Promise<void>) {
    this.#busy.add(agentId)
    const running = step()
      .catch((error) => this.options.log(`swarm state: agent ${agentId}`, { error: String(error) }))
      .finally(() => {
        this.#busy.delete(agentId)
        this.#steps.delete(running)
      })
    this.#steps.add(running)
  }

  async #container(task: AgentTask): Promise<Docker.Container> {
    const engine = await this.options.nodes.engineOf(task.nodeId)
    return engine.getContainer(task.containerId!)
  }

  async #gateOf(container: Docker.Container, layout: StateLayout): Promise<string | null> {
    const path = `${layout.statePath}/${GATE_FILE}`
    const stream = await inTime('gate', (abortSignal) =>
      ignoreStatus(container.getArchive({ path, abortSignal } as never), 404)
    )
    if (!stream) return null
    const chunks: Buffer[] = []
    for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk)
    const entry = parseTar(Buffer.concat(chunks)).find((item) => item.type === 'file')
    return entry?.content?.toString('utf8').trim() ?? null
  }

  /**
   * Opens the gate of `task` (running, wanted): settles the task before it,
   * restores the newest snapshot and the rendered files into its volume,
   * then writes the gate file. Skipped while another instance holds the
   * agent's row; done at most once per task.
   */
  async release(task: AgentTask, layout: StateLayout): Promise<void> {
    const done = await this.options.store.withAgent(
      task.agentId,
      { wait: false },
      async (state) => {
        const container = await this.#container(task)
        if ((await this.#gateOf(container, layout)) === task.id) {
          if (state.row.releasedTask !== task.id) await state.released(task.id)
          return true
        }
        if (state.row.releasedTask && state.row.releasedTask !== task.id) {
          await this.settle(state, layout, { before: task })
        }
        const snapshot = await state.readSnapshot()
        if (snapshot) await container.putArchive(snapshot, { path: layout.statePath })
        const paths = { state: layout.statePath, workspace: layout.workspacePath }
        await putRenderedFiles(container, state.rendered(), paths, layout)
        const gate = createTar([
          {
            name: GATE_FILE,
            type: 'file',
            content: Buffer.from(task.id),
            mode: 0o644,
            ...layout.owner,
          },
        ])
        await container.putArchive(gate, { path: layout.statePath })
        await state.released(task.id)
        this.options.log('swarm state: task released', {
          agentId: task.agentId,
          task: task.id,
          node: task.nodeId,
          generation: state.row.generation,
        })
        return true
      }
    )
    if (done) {
      this.#released.add(task.id)
      this.#shippedAt.set(task.agentId, Date.now())
    }
  }

  /** A running agent's periodic snapshot (skipped when another instance just took one). */
  async #ship(task: AgentTask, layout: StateLayout) {
    try {
      await this.options.store.withAgent(task.agentId, { wait: false }, async (state) => {
        const takenAt = state.row.takenAt?.getTime() ?? 0
        if (state.row.releasedTask !== task.id || Date.now() - takenAt < this.#every * 0.8) return
        await this.#snapshot(state, task, layout, false)
      })
      this.#shippedAt.set(task.agentId, Date.now())
    } catch (error) {
      // Its node may be lost (the manager says so only after its heartbeats lapse): leave it be.
      if (error instanceof NodeSilent) {
        this.#unreachable.set(task.nodeId, Date.now() + UNREACHABLE_PAUSE_MS)
      }
      throw error
    }
  }

  /** A snapshot of the running task `task` now (a warm sleep), if it is the one released. */
  async ship(state: AgentState, task: AgentTask, layout: StateLayout) {
    if (state.row.releasedTask !== task.id) return
    await this.#snapshot(state, task, layout, false)
    this.#shippedAt.set(task.agentId, Date.now())
  }

  async #snapshot(state: AgentState, task: AgentTask, layout: StateLayout, final: boolean) {
    const container = await this.#container(task)
    // Paused for the copy when it runs: one moment of its files, as after a power cut.
    const paused =
      !final &&
      (await inTime('pause', (abortSignal) => container.pause({ abortSignal })).then(
        () => true,
        (error) => {
          // Refused (not running any more): copied as it is. Silent: its node is probably lost.
          if (error instanceof NodeSilent) throw error
          return false
        }
      ))
    try {
      const path = `${layout.statePath}/.`
      const archive = await inTime('snapshot', (abortSignal) =>
        container.getArchive({ path, abortSignal } as never)
      )
      const changed = await state.writeSnapshot(archive, { taskId: task.id, final })
      if (changed) {
        this.options.log('swarm state: snapshot', {
          agentId: task.agentId,
          task: task.id,
          final,
          generation: state.row.generation,
          bytes: state.row.bytes,
        })
      }
    } finally {
      if (paused) {
        await inTime('unpause', (abortSignal) => container.unpause({ abortSignal })).catch(() => {})
      }
    }
  }

  /**
   * The last snapshot of the task last released, once it ended: what it
   * wrote since its last periodic snapshot. Nothing when it still runs, when
   * its node is lost (the store's snapshot stands), or when it was already
   * taken. `before`: the new task about to be released (never snapshotted).
   * `attempts`: tries while its node is ready (a busy engine answers late);
   * a stop asks for more than a new task's release, which a lost node would
   * hold up.
   */
  async settle(
    state: AgentState,
    layout: StateLayout,
    options: { before?: AgentTask; attempts?: number } = {}
  ) {
    const { releasedTask, snapshotOf, final } = state.row
    if (!releasedTask || (final && snapshotOf === releasedTask)) return
    if (releasedTask === options.before?.id) return
    const raw = await ignoreStatus(this.options.manager.getTask(releasedTask).inspect(), 404)
    if (!raw) return
    const task = taskOf(raw, state.agentId)
    if (task.desiredState === 'running' && task.state === 'running') return
    const skip = (why: string) =>
      this.options.log('swarm state: no last snapshot of an ended task', {
        agentId: state.agentId,
        task: task.id,
        why,
      })
    if (!task.containerId) return skip('it has no container')
    for (let attempt = 1; ; attempt++) {
      const node = await this.options.nodes.node(task.nodeId)
      if (!node?.ready) return skip(`its node is ${node ? 'not ready' : 'gone'}`)
      try {
        await this.#snapshot(state, task, layout, true)
        return
      } catch (error) {
        // Its container is gone with its node's disk: the store's snapshot stands.
        this.options.log('swarm state: last snapshot of an ended task failed', {
          agentId: state.agentId,
          task: task.id,
          attempt,
          error: String(error),
        })
        if (attempt >= (options.attempts ?? 1)) return
      }
    }
  }

  /**
   * Each node's volumes of tasks that are neither wanted nor the last one
   * released (its volume serves files at rest), with their ended containers.
   */
  async #collect() {
    const running = await this.#running()
    const keep = new Set(running.map(({ task }) => taskVolumeName(task.agentId, task.id)))
    for (const [agentId, taskId] of await this.options.store.releasedTasks()) {
      if (taskId) keep.add(taskVolumeName(agentId, taskId))
    }
    for (const engine of await this.options.nodes.answeringEngines()) {
      const { Volumes } = await engine.listVolumes({
        filters: { label: [`${LABELS.managed}=true`] },
      })
      for (const volume of Volumes ?? []) {
        if (keep.has(volume.Name) || !volume.Labels?.[LABELS.agentId]) continue
        if (!/-state-[a-z0-9]{25}$/.test(volume.Name)) continue
        await removeVolume(engine, volume.Name)
      }
    }
  }
}
