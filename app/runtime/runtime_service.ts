import { enterPhase, phaseFromEvent } from '#runtime/boot_phases'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import { AgentStarts } from '#runtime/agent_starts'
import type { FrameworkPlugin } from '#plugins/types'
import { chatOnce, chatStream, type ChatTarget } from '#runtime/chat_client'
import { AgentNotRunningException } from '#core/exceptions/api_exceptions'
import { warmUpRequest } from '#runtime/warm_up'
import { untilReady } from '#runtime/readiness'
import { RuntimeEventFanOut } from '#runtime/runtime_events'
import { RuntimeBooks } from '#runtime/runtime_books'
import { recoverAgents, type RecoverOptions, type RecoveryResult } from '#runtime/runtime_recovery'
import type { RuntimeServiceOptions, StartOptions } from '#runtime/runtime_service_types'
import type {
  AgentRuntimeSpec,
  NewAgentSpec,
  ContainerChatChunk,
  ContainerChatReply,
  ContainerChatRequest,
  ContainerInfo,
  RuntimeEvent,
  RuntimeEventListener,
  SkillChange,
} from '#runtime/types'

export type {
  ContainerView,
  FrameworkResolver,
  RuntimeServiceOptions,
  RuntimeSnapshot,
  StartOptions,
} from '#runtime/runtime_service_types'

/** Longest wait for the warm-up turn (OpenClaw's takes ~8 s of CPU, more on a busy host). */
const WARM_UP_TIMEOUT_MS = 120_000

/**
 * What the agents and chat areas call to run agents. One instance per
 * service process; it holds no state another instance needs (the driver's
 * records live in each agent's folder or in the container engine).
 *
 * Container-only operations (monitoring, live logs, files, memory, chat)
 * throw AgentNotRunningException (409) when the agent's container is not
 * running. The reads are RuntimeReads' (runtime_reads.ts), the capacity
 * books RuntimeBooks' (runtime_books.ts); this class starts, stops, puts to
 * sleep and talks to agents.
 */
export class RuntimeService extends RuntimeBooks {
  readonly #events: RuntimeEventFanOut
  readonly #detachDriver: () => void
  readonly #starts: AgentStarts
  /** Agents being restarted by their supervisor after a crash. */
  readonly #crashRestarts = new Set<string>()

  constructor(options: RuntimeServiceOptions) {
    super(options)
    this.#events = new RuntimeEventFanOut((error) =>
      options.log?.('error', `runtime event listener failed: ${error.message}`)
    )
    this.#starts = new AgentStarts({
      ...options,
      capacity: this.capacityManager,
      preparesAtOnce: options.capacity?.preparesAtOnce,
      plans: this.plans,
      isReady: (agentId) => this.tracker.ready.has(agentId),
      create: (spec, runId) => this.#create(spec, runId),
      waitUntilReady: (agentId, wait) => this.waitUntilReady(agentId, wait),
    })
    this.#detachDriver = this.driver.onEvent((event) => this.#emit(event))
  }

  #emit(raw: RuntimeEvent) {
    const event = this.tracker.track(raw)
    phaseFromEvent(event)
    if (event.type === 'error' || event.type === 'exited') {
      this.options.log?.('warn', `agent ${event.agentId}: ${event.type}`, {
        reason: 'reason' in event ? event.reason : event.message,
      })
    }
    this.#events.emit(event)
    // A crash restart is the supervisor's own start: nobody else watches it become ready.
    if (event.type === 'restarting') this.#crashRestarts.add(event.agentId)
    if (event.type === 'started' && this.#crashRestarts.delete(event.agentId)) {
      this.waitUntilReady(event.agentId).catch(() => {})
    }
    if (event.type === 'stopped' || event.type === 'error')
      this.#crashRestarts.delete(event.agentId)
  }

  /**
   * Subscribes to started / ready / exited / restarting / error / stopped.
   * The agents layer writes feed events from these and sets the agent's
   * status to `error` on `error`. Returns the unsubscribe function.
   */
  onEvent(listener: RuntimeEventListener): () => void {
    return this.#events.onEvent(listener)
  }

  async #create(spec: AgentRuntimeSpec, containerId?: string): Promise<ContainerInfo> {
    const plugin = this.options.frameworks.framework(spec.framework)
    const gatewayToken = await this.gatewayToken(spec.agentId)
    this.redaction.remember(spec.agentId, spec.config, [gatewayToken, spec.modelProxy.token])
    try {
      return await this.driver.create({ spec, plugin, gatewayToken, containerId })
    } catch (error) {
      // The framework could not even be prepared (not installed, bad config): say so like a crash.
      this.#emit({
        type: 'error',
        agentId: spec.agentId,
        message: (error as Error).message,
        restartCount: 0,
        at: new Date(),
      })
      throw error
    }
  }

  /**
   * Starts the agent's container unless it runs already; after a service
   * restart a live one is adopted instead. Does not wait for readiness
   * unless `waitReady` is set (creating an agent starts it in the
   * background; see waitUntilReady).
   */
  async ensureStarted(spec: AgentRuntimeSpec, options: StartOptions = {}): Promise<ContainerInfo> {
    const { runId, priority, askedAt } = options
    const { info } = await this.#starts.startOrAdopt(spec, runId, priority, askedAt)
    if (options.waitReady) {
      await this.waitUntilReady(spec.agentId, options)
      return this.driver.inspect(spec.agentId)
    }
    return info
  }

  /**
   * The container id a start answers: the run already scheduled or live,
   * else (and always with `fresh`, a restart) a new run's, which its
   * container will carry. Cheap: no container is touched.
   */
  async planRun(agentId: string, options: { fresh?: boolean } = {}): Promise<string> {
    return this.plans.plan(this.driver, agentId, options)
  }

  /** No run is wanted any more (a stop): a start waiting for its turn boots nothing. */
  cancelRun(agentId: string): void {
    this.plans.cancel(agentId)
    this.cancelQueuedStart(agentId)
  }

  /**
   * Scale to zero: stops the container and keeps everything it has on
   * disk; reported as a `sleeping` event. The next start wakes it.
   */
  async sleep(agentId: string, options: { warmUp?: boolean } = {}): Promise<void> {
    this.tracker.sleeping.add(agentId)
    const beforeCheckpoint = options.warmUp === false ? undefined : () => this.#warmUp(agentId)
    const untouched = !this.tracker.hadTurn.has(agentId)
    try {
      await (this.driver.hibernate
        ? this.driver.hibernate(agentId, { beforeCheckpoint, untouched })
        : this.driver.stop(agentId))
    } finally {
      // A stop that emitted no event (nothing ran) leaves no mark behind. One that did
      // released its room then: a start of it queued since keeps its place.
      if (this.tracker.sleeping.delete(agentId)) this.capacityManager.release(agentId)
    }
  }

  /**
   * Before a checkpoint: a framework whose first turn does slow one-time work
   * (`warmUpBeforeCheckpoint`) and that has had no turn since it booted gets
   * a private one (app/runtime/warm_up.ts), so the checkpoint holds that work
   * and a wake answers a user's message without redoing it. A failure only
   * costs the wake that time.
   */
  async #warmUp(agentId: string): Promise<void> {
    if (this.options.warmUpBeforeCheckpoint === false) return
    if (this.tracker.hadTurn.has(agentId) || !this.tracker.ready.has(agentId)) return
    try {
      const { framework } = await this.driver.inspect(agentId)
      if (!framework || !this.options.frameworks.framework(framework).warmUpBeforeCheckpoint) return
      await this.chat(agentId, warmUpRequest(AbortSignal.timeout(WARM_UP_TIMEOUT_MS)))
    } catch (error) {
      this.options.log?.('warn', `agent ${agentId}: warm-up turn failed`, {
        reason: (error as Error).message,
      })
    }
  }

  /**
   * Installs and warms every framework ahead of any agent, where the driver
   * can (the process driver); called in the background at service start.
   */
  async prepareFrameworks(plugins: FrameworkPlugin[], newAgentSpec?: NewAgentSpec) {
    await this.driver.prepareFrameworks?.(plugins, newAgentSpec)
  }

  /** Stops then starts it with a freshly rendered config; the container id changes. */
  async restart(spec: AgentRuntimeSpec, options: StartOptions = {}): Promise<ContainerInfo> {
    this.plans.assertWanted(spec.agentId, options.runId)
    await this.stop(spec.agentId)
    return this.ensureStarted(spec, options)
  }

  /**
   * A config change (PATCH, restore): a running agent restarts with the new
   * config; a stopped one gets it at its next start.
   */
  async reconfigure(spec: AgentRuntimeSpec): Promise<ContainerInfo> {
    const info = await this.driver.inspect(spec.agentId)
    if (info.state === 'running' || info.state === 'starting' || info.state === 'restarting') {
      return this.restart(spec)
    }
    return info
  }

  /** Stops it, keeping its data and config. */
  async stop(agentId: string): Promise<void> {
    try {
      await this.driver.stop(agentId)
      // A boot cancelled before it launched ends with no `stopped` event of the driver's.
      enterPhase(agentId, 'stopped')
    } finally {
      this.plans.stopDone(agentId)
    }
  }

  /** Stops it and deletes its container and every file it had. Irreversible. */
  async remove(agentId: string): Promise<void> {
    await this.driver.remove(agentId)
    this.plans.stopDone(agentId)
    this.redaction.forget(agentId)
    this.tracker.hadTurn.delete(agentId)
  }

  /**
   * Puts the agent's skills on disk now (install / uninstall), running or
   * not. A framework that does not watch its skills folder is restarted
   * when its container runs. Unknown to the driver: applied at first start.
   */
  async syncSkills(spec: AgentRuntimeSpec, change: SkillChange): Promise<void> {
    const plugin = this.options.frameworks.framework(spec.framework)
    if (!plugin.skillsDir) {
      throw new ServiceUnavailableException(`The ${spec.framework} framework does not load skills`)
    }
    await this.driver.syncSkills(spec.agentId, plugin, change)
    if (plugin.skillsDir.reload === 'restart') await this.reconfigure(spec)
  }

  /** Resolves once the framework answers 2xx on its readiness path (readiness.ts). */
  async waitUntilReady(
    agentId: string,
    options: { timeoutMs?: number; signal?: AbortSignal } = {}
  ): Promise<void> {
    const timeoutMs = options.timeoutMs ?? this.options.readinessTimeoutMs ?? 180_000
    await untilReady(
      this.driver,
      this.options.frameworks,
      agentId,
      {
        timeoutMs,
        signal: options.signal,
        pending: () => this.plans.scheduled(agentId) !== undefined,
      },
      (containerId) => this.#emit({ type: 'ready', agentId, containerId, at: new Date() })
    )
  }

  async #requireTarget(agentId: string, target?: ChatTarget): Promise<ChatTarget> {
    const resolved = target ?? (await this.target(agentId))
    if (!resolved) throw new AgentNotRunningException()
    return resolved
  }

  /**
   * One reply from the agent's own framework (its /v1/chat/completions), at
   * `target` when the caller resolved it (else looked up now).
   * AgentNotRunningException when not running; ModelGatewayError when the
   * framework fails (the chat area then falls back to the hosted path).
   */
  async chat(
    agentId: string,
    request: ContainerChatRequest,
    target?: ChatTarget
  ): Promise<ContainerChatReply> {
    const resolved = await this.#requireTarget(agentId, target)
    // From its sending: a turn cut short may still have changed the run (a sleep keeps it).
    this.tracker.hadTurn.add(agentId)
    return chatOnce(resolved, request, { replyTimeoutMs: this.options.chatTimeoutMs })
  }

  /** The same, streamed: yields `{ token }` chunks and returns the whole reply. */
  async *chatStream(
    agentId: string,
    request: ContainerChatRequest,
    target?: ChatTarget
  ): AsyncGenerator<ContainerChatChunk, ContainerChatReply> {
    const resolved = await this.#requireTarget(agentId, target)
    this.tracker.hadTurn.add(agentId)
    return yield* chatStream(resolved, request, { replyTimeoutMs: this.options.chatTimeoutMs })
  }

  /**
   * At service boot: for every agent that should be running, adopt its live
   * container or start it again; stop containers of agents that no longer
   * exist. Failures are reported per agent, never thrown.
   */
  async recover(specs: AgentRuntimeSpec[], options: RecoverOptions = {}): Promise<RecoveryResult> {
    return recoverAgents(specs, options, {
      driver: this.driver,
      planRun: (agentId) => this.planRun(agentId),
      startOrAdopt: (spec, runId, priority) => this.#starts.startOrAdopt(spec, runId, priority),
    })
  }

  /** Service shutdown, first step: the process driver's agents stop (engines' keep running). */
  async stopAgents(options: { spare?: (agentId: string) => boolean } = {}): Promise<void> {
    // Starts waiting for a boot slot boot nothing now.
    this.plans.clear()
    this.capacityManager.cancelQueued()
    await this.driver.stopAll?.(options)
  }

  /**
   * Service shutdown. The process driver's agents are this service's own
   * children: they stop with it (SIGTERM, then SIGKILL), so stopping the
   * service leaves no agent process behind. Containers of an engine
   * (docker, swarm) keep running under it. A crash (no shutdown) leaves
   * process agents running for the next boot to adopt (`stopAgents: false`
   * detaches the same way).
   */
  async shutdown(options: { stopAgents?: boolean } = {}): Promise<void> {
    if (options.stopAgents !== false) await this.stopAgents()
    this.#detachDriver()
    await this.driver.close()
  }
}
