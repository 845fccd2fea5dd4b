import { knownPhase } from '#runtime/boot_phases'
import type { ChatTarget } from '#runtime/chat_client'
import type { HostPlacement } from '#runtime/placement/host_placement'
import { AgentRouting } from '#runtime/placement/agent_routing'
import { RuntimeService } from '#runtime/runtime_service'
import type { RecoverOptions, RecoveryResult } from '#runtime/runtime_recovery'
import type {
  RuntimeServiceOptions,
  RuntimeSnapshot,
  StartOptions,
} from '#runtime/runtime_service_types'
import type {
  AgentRuntimeSpec,
  ContainerChatChunk,
  ContainerChatReply,
  ContainerChatRequest,
  ContainerInfo,
  MonitoringFigures,
  RuntimeStats,
  SkillChange,
} from '#runtime/types'

/** What crosses the peer link of a start's options (no abort signal). */
function wireOptions(options: StartOptions): StartOptions {
  const { waitReady, timeoutMs, runId, priority, askedAt } = options
  return { waitReady, timeoutMs, runId, priority, askedAt }
}

/** A ContainerInfo that crossed the link as JSON: its date is a date again. */
function revived<T extends { startedAt: Date | null }>(info: T): T {
  return { ...info, startedAt: info.startedAt ? new Date(info.startedAt) : null }
}

/**
 * The runtime service of one instance among several on a host sharing
 * STORAGE_DIR, the database and Redis (docs/runtime.md "Many machines";
 * process driver). Each agent's process tree is supervised by one instance,
 * the holder of its lease (host_placement.ts): starts, stops, sleeps,
 * restarts, skill changes and the views of its container (status, queue,
 * phase, monitoring) run there, asked over the peer link by any other
 * instance. Chat, logs, files and memory are served by whichever instance
 * the request reaches: the agent's address, port and gateway token are in
 * its record and credentials on the shared storage, which any instance of
 * the host reads; messages and turns seen elsewhere reach the holder in
 * batches (they order its sleeps and warm-up).
 */
export class PlacedRuntimeService extends RuntimeService {
  readonly placement: HostPlacement
  readonly #routing: AgentRouting

  constructor(options: RuntimeServiceOptions & { placement: HostPlacement }) {
    super(options)
    this.placement = options.placement
    this.#routing = new AgentRouting(this.placement)
    // Given up on after repeated crashes (or never prepared): nothing runs to hold.
    this.onEvent((event) => {
      if (event.type === 'error') void this.placement.release(event.agentId).catch(() => {})
    })
    this.#serve()
  }

  /** Listens for the other instances and keeps the leases (after the app booted). */
  async startPlacement(): Promise<void> {
    await this.placement.start({
      live: () => this.driver.liveAgents?.() ?? [],
      inUse: (agentId) =>
        this.#routing.busy(agentId) ||
        this.driver.liveAgents?.().includes(agentId) === true ||
        this.capacityManager.isQueued(agentId) ||
        this.capacityManager.isAdmitted(agentId) ||
        this.plans.scheduled(agentId) !== undefined,
      lost: (agentId) => this.#forget(agentId),
    })
  }

  /** Stops supervising the agent here; its processes keep running for their new holder. */
  #forget(agentId: string) {
    this.driver.detach?.(agentId)
    this.capacityManager.release(agentId)
    this.tracker.ready.delete(agentId)
  }

  #activity(touched: string[], turns: string[]) {
    for (const agentId of touched) if (this.placement.heldHere(agentId)) super.touch(agentId)
    for (const agentId of turns)
      if (this.placement.heldHere(agentId)) this.tracker.hadTurn.add(agentId)
  }

  /** The operations other instances ask of this one, for the agents it holds. */
  #serve() {
    const routing = this.#routing
    const spec = (args: unknown[]) => args[0] as AgentRuntimeSpec
    const specId = (args: unknown[]) => spec(args).agentId
    const id = (args: unknown[]) => args[0] as string
    const claim = { claim: true }
    routing.serve(
      'ensureStarted',
      specId,
      (args) => super.ensureStarted(spec(args), args[1] as StartOptions),
      claim
    )
    routing.serve(
      'restart',
      specId,
      (args) => super.restart(spec(args), args[1] as StartOptions),
      claim
    )
    routing.serve('reconfigure', specId, (args) => super.reconfigure(spec(args)))
    routing.serve('syncSkills', specId, (args) =>
      super.syncSkills(spec(args), args[1] as SkillChange)
    )
    // A stop or delete from elsewhere cancels what was scheduled here too: the caller's
    // cancelRun (RuntimeService.cancelRun) only reaches its own books.
    routing.serve('stop', id, async (args) => {
      super.cancelRun(id(args))
      await this.#stopHere(id(args))
    })
    routing.serve('remove', id, async (args) => {
      super.cancelRun(id(args))
      await this.#removeHere(id(args))
    })
    routing.serve('sleep', id, (args) => this.#sleepHere(id(args), args[1] as { warmUp?: boolean }))
    routing.serve('planRun', id, (args) => super.planRun(id(args), args[1] as { fresh?: boolean }))
    routing.serve('snapshot', id, (args) => this.#snapshotHere(id(args)))
    routing.serve('stats', id, (args) => super.stats(id(args)))
    routing.serve('monitoring', id, (args) => super.monitoring(id(args)))
    this.placement.link.handle('activity', async (args) =>
      this.#activity(args[0] as string[], args[1] as string[])
    )
  }

  /** The views of its container this instance keeps (it holds the agent, or nobody does). */
  async #snapshotHere(agentId: string): Promise<RuntimeSnapshot> {
    const [info, view] = await Promise.all([super.status(agentId), super.containerView(agentId)])
    const queuePosition = await this.capacityManager.hostQueuePosition(agentId)
    return { info, view, queuePosition, phase: knownPhase(agentId) }
  }

  async #stopHere(agentId: string): Promise<void> {
    await super.stop(agentId)
    await this.placement.release(agentId)
  }

  async #removeHere(agentId: string): Promise<void> {
    await super.remove(agentId)
    await this.placement.release(agentId)
  }

  async #sleepHere(agentId: string, options?: { warmUp?: boolean }): Promise<void> {
    await super.sleep(agentId, options)
    await this.placement.release(agentId)
  }

  /** Asked now (its place in the boot queue), wherever it is started. */
  override async ensureStarted(
    spec: AgentRuntimeSpec,
    options: StartOptions = {}
  ): Promise<ContainerInfo> {
    const asked = { ...options, askedAt: options.askedAt ?? Date.now() }
    const timeoutMs = options.waitReady ? (options.timeoutMs ?? 180_000) + 10_000 : 60_000
    const info = await this.#routing.routed(
      spec.agentId,
      'ensureStarted',
      [spec, wireOptions(asked)],
      () => super.ensureStarted(spec, asked),
      { claim: true, timeoutMs }
    )
    return revived(info)
  }

  override async restart(spec: AgentRuntimeSpec, options: StartOptions = {}) {
    const asked = { ...options, askedAt: options.askedAt ?? Date.now() }
    const info = await this.#routing.routed(
      spec.agentId,
      'restart',
      [spec, wireOptions(asked)],
      () => super.restart(spec, asked),
      { claim: true }
    )
    return revived(info)
  }

  override async reconfigure(spec: AgentRuntimeSpec): Promise<ContainerInfo> {
    const info = await this.#routing.routed(spec.agentId, 'reconfigure', [spec], () =>
      super.reconfigure(spec)
    )
    return revived(info)
  }

  override async syncSkills(spec: AgentRuntimeSpec, change: SkillChange): Promise<void> {
    await this.#routing.routed(spec.agentId, 'syncSkills', [spec, change], () =>
      super.syncSkills(spec, change)
    )
  }

  override async stop(agentId: string): Promise<void> {
    await this.#routing.routed(agentId, 'stop', [agentId], () => this.#stopHere(agentId))
  }

  override async remove(agentId: string): Promise<void> {
    await this.#routing.routed(agentId, 'remove', [agentId], () => this.#removeHere(agentId))
  }

  override async sleep(agentId: string, options: { warmUp?: boolean } = {}): Promise<void> {
    // A sleep takes a checkpoint, and maybe a warm-up turn first (up to 2 minutes).
    await this.#routing.routed(
      agentId,
      'sleep',
      [agentId, options],
      () => this.#sleepHere(agentId, options),
      {
        timeoutMs: 300_000,
      }
    )
  }

  override async planRun(agentId: string, options: { fresh?: boolean } = {}): Promise<string> {
    return this.#routing.routed(agentId, 'planRun', [agentId, options], () =>
      super.planRun(agentId, options)
    )
  }

  override touch(agentId: string): void {
    super.touch(agentId)
    if (!this.placement.heldHere(agentId)) this.placement.noteActivity(agentId, false)
  }

  override prioritize(agentId: string): void {
    super.prioritize(agentId)
    if (!this.placement.heldHere(agentId)) this.placement.noteActivity(agentId, false)
  }

  override async snapshot(agentId: string): Promise<RuntimeSnapshot> {
    const seen = await this.#routing.routed(agentId, 'snapshot', [agentId], () =>
      this.#snapshotHere(agentId)
    )
    return { ...seen, info: revived(seen.info) }
  }

  override async containerView(agentId: string) {
    if (this.placement.heldHere(agentId)) return super.containerView(agentId)
    const { view } = await this.snapshot(agentId)
    return view
  }

  override async status(agentId: string): Promise<ContainerInfo> {
    if (this.placement.heldHere(agentId)) return super.status(agentId)
    const { info } = await this.snapshot(agentId)
    return info
  }

  override async stats(agentId: string): Promise<RuntimeStats> {
    return this.#routing.routed(agentId, 'stats', [agentId], () => super.stats(agentId))
  }

  override async monitoring(agentId: string): Promise<MonitoringFigures> {
    return this.#routing.routed(agentId, 'monitoring', [agentId], () => super.monitoring(agentId))
  }

  override async chat(
    agentId: string,
    request: ContainerChatRequest,
    target?: ChatTarget
  ): Promise<ContainerChatReply> {
    // Told as it is sent: the holder's sleep keeps a run that has been sent a turn.
    if (!this.placement.heldHere(agentId)) this.placement.noteActivity(agentId, true)
    return super.chat(agentId, request, target)
  }

  override async *chatStream(
    agentId: string,
    request: ContainerChatRequest,
    target?: ChatTarget
  ): AsyncGenerator<ContainerChatChunk, ContainerChatReply> {
    if (!this.placement.heldHere(agentId)) this.placement.noteActivity(agentId, true)
    return yield* super.chatStream(agentId, request, target)
  }

  /** Its logs, with its gateway token masked even when this instance never started it. */
  override async logs(agentId: string, options: { tail?: number } = {}): Promise<string> {
    await this.#knowSecrets(agentId)
    return super.logs(agentId, options)
  }

  override async followLogs(
    agentId: string,
    options: { tail?: number; signal?: AbortSignal } = {}
  ): Promise<AsyncIterable<string>> {
    await this.#knowSecrets(agentId)
    return super.followLogs(agentId, options)
  }

  async #knowSecrets(agentId: string) {
    if (this.redaction.knows(agentId)) return
    this.redaction.remember(agentId, {}, [await this.gatewayToken(agentId)])
  }

  /**
   * At boot: the agents no live instance holds are claimed and recovered
   * here (adopted or started); those others hold are left to them, and the
   * sweep leaves them alone.
   */
  override async recover(
    specs: AgentRuntimeSpec[],
    options: RecoverOptions = {}
  ): Promise<RecoveryResult> {
    const mine: AgentRuntimeSpec[] = []
    for (const spec of specs) {
      const { held } = await this.placement.claim(spec.agentId)
      if (held) mine.push(spec)
    }
    const keep = [...(options.keep ?? []), ...(await this.placement.heldElsewhere())]
    return super.recover(mine, { ...options, keep })
  }

  /**
   * Shutdown: with another instance alive on the host, this one stops
   * supervising and lets its leases lapse, and that instance adopts the
   * agents (they keep running); the last instance stops its agents, and
   * what still runs of agents no other live instance holds.
   */
  override async stopAgents(): Promise<void> {
    const handedOver = await this.placement.handOver(() => {
      this.plans.clear()
      this.capacityManager.cancelQueued()
      for (const agentId of this.driver.liveAgents?.() ?? []) this.#forget(agentId)
    })
    if (handedOver) return
    const others = new Set(await this.placement.heldElsewhere())
    await super.stopAgents({ spare: (agentId) => others.has(agentId) })
  }

  override async shutdown(options: { stopAgents?: boolean } = {}): Promise<void> {
    await super.shutdown(options)
    await this.placement.stop()
  }
}
