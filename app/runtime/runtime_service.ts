import { randomBytes } from 'node:crypto'
import { enterPhase, phaseFromEvent } from '#runtime/boot_phases'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  AgentNotRunningException,
  ServiceUnavailableException,
} from '#core/exceptions/api_exceptions'
import type { FrameworkPlugin } from '#plugins/types'
import { agentPaths, ensureServiceFolder } from '#runtime/agent_paths'
import { chatOnce, chatStream, type ChatTarget } from '#runtime/chat_client'
import { gatewayTokenFor } from '#runtime/credentials'
import { warmUpRequest } from '#runtime/warm_up'
import { assertStartable, overQuota, withWorkspaceQuota } from '#runtime/files/workspace_quota'
import {
  BootCancelledError,
  CapacityManager,
  type BootPriority,
  type BootQueueOrder,
  type CapacitySnapshot,
} from '#runtime/capacity/capacity_manager'
import type {
  AgentRuntimeSpec,
  ContainerChatChunk,
  ContainerChatReply,
  ContainerChatRequest,
  ContainerDriver,
  ContainerInfo,
  MonitoringFigures,
  RuntimeEvent,
  RuntimeEventListener,
  RuntimeStats,
  SkillChange,
  WorkspaceFiles,
} from '#runtime/types'

/** How often a log stream of a container not yet running looks for it to run. */
const LOG_FOLLOW_POLL_MS = 1000
/** Most lines a log stream catches up on when the container it waited for starts. */
const LOG_CATCH_UP_LINES = 1000
/** How long a boot past the readiness timeout is still watched for its first answer. */
const SLOW_BOOT_WATCH_MS = 15 * 60_000

/** Finds an installed framework plugin by name (the PluginRegistry fits). */
export interface FrameworkResolver {
  framework(name: string): FrameworkPlugin
}

export interface RuntimeServiceOptions {
  driver: ContainerDriver
  frameworks: FrameworkResolver
  /** `<storage>/agents`; the runtime keeps each agent's gateway token there. */
  agentsDir: string
  /** Default for waitUntilReady. Default 180 s (OpenClaw takes ~15 s on 2 cores). */
  readinessTimeoutMs?: number
  /** Longest wait for a chat reply (or a stream's first bytes). Default 300 s. */
  chatTimeoutMs?: number
  /**
   * Boot queue and memory budget (app/runtime/capacity), and the most an
   * agent's workspace may hold (files/workspace_quota); unlimited when
   * absent. Read at each use, so a change applies at once.
   */
  capacity?: {
    bootConcurrency: number
    memoryBudgetMb: number
    workspaceQuotaMb?: number
    /** The boot queue's order (capacity_manager.ts); fifo is the bench's baseline only. */
    bootQueue?: BootQueueOrder
  }
  /** The warm-up turn before a first checkpoint (see #warmUp). Default on; bench:wake turns it off to compare. */
  warmUpBeforeCheckpoint?: boolean
  log?: (
    level: 'info' | 'warn' | 'error',
    message: string,
    detail?: Record<string, unknown>
  ) => void
}

/**
 * What the agents area reports as `container` (CONTRACT.md): the runtime
 * knows all but `sleeping`, which is an `active` agent with no container
 * running (the agents area tells it from the stored status).
 */
export type ContainerView = 'running' | 'starting' | 'queued' | 'stopped' | 'error'

export interface StartOptions {
  waitReady?: boolean
  timeoutMs?: number
  signal?: AbortSignal
  /** The run id planRun answered: the container takes it; no boot once another run is wanted. */
  runId?: string
  /**
   * Its place in the boot queue: interactive (default: a message, an
   * owner's start) or background (a new agent booted ahead of time,
   * recovery), which waits for every interactive start and never puts an
   * agent to sleep for room.
   */
  priority?: BootPriority
}

/** Longest wait for the warm-up turn (OpenClaw's takes ~8 s of CPU, more on a busy host). */
const WARM_UP_TIMEOUT_MS = 120_000

/** Config keys whose values are secrets (CONTRACT.md): they never reach a log answer. */
const SECRET_KEY = /(key|token|secret|password)$/i

function secretValues(value: unknown, key = '', into = new Set<string>()): Set<string> {
  if (typeof value === 'string') {
    if (SECRET_KEY.test(key) && value.length >= 6) into.add(value)
  } else if (Array.isArray(value)) {
    for (const item of value) secretValues(item, key, into)
  } else if (value && typeof value === 'object') {
    for (const [child, item] of Object.entries(value)) secretValues(item, child, into)
  }
  return into
}

/**
 * What the agents and chat areas call to run agents. One instance per
 * service process; it holds no state another instance needs (the driver's
 * records live in each agent's folder or in the container engine).
 *
 * Container-only operations (monitoring, live logs, files, memory, chat)
 * throw AgentNotRunningException (409) when the agent's container is not
 * running.
 */
export class RuntimeService {
  readonly driver: ContainerDriver
  readonly #listeners = new Set<RuntimeEventListener>()
  readonly #secrets = new Map<string, Set<string>>()
  readonly #detachDriver: () => void
  readonly #capacity: CapacityManager
  /** Agents whose framework answered its readiness path since their last start. */
  readonly #ready = new Set<string>()
  /** Agents being put to sleep: their `stopped` event is reported as `sleeping`. */
  readonly #sleeping = new Set<string>()
  /** Agents whose running framework has answered a turn since it booted (a restore keeps it). */
  readonly #hadTurn = new Set<string>()
  /**
   * The run each agent is to have next, by the container id the API
   * answered when it was scheduled (planRun); until its container starts
   * under that id, status reports it. A start whose run is no longer
   * wanted (stopped, restarted meanwhile) boots nothing.
   */
  readonly #runs = new Map<string, string>()
  /** Agents stopped whose container may still run until the stop is done: its run is not reused. */
  readonly #unwanted = new Set<string>()

  constructor(private readonly options: RuntimeServiceOptions) {
    this.driver = options.driver
    this.#capacity = new CapacityManager({
      bootConcurrency: options.capacity?.bootConcurrency ?? Number.POSITIVE_INFINITY,
      memoryBudgetMb: options.capacity?.memoryBudgetMb ?? Number.POSITIVE_INFINITY,
      order: options.capacity?.bootQueue,
      // A sleep for room: a start waits on it, so it takes no warm-up turn.
      sleep: (agentId) => this.sleep(agentId, { warmUp: false }),
      log: (message, detail) => options.log?.('info', message, detail),
    })
    this.#detachDriver = this.driver.onEvent((event) => this.#emit(event))
  }

  /** Keeps the capacity books and readiness in step with what containers do. */
  #track(event: RuntimeEvent): RuntimeEvent {
    switch (event.type) {
      case 'ready':
        this.#ready.add(event.agentId)
        this.#capacity.booted(event.agentId)
        break
      case 'started':
        // The scheduled run is up under its id: the driver reports it from now on.
        if (this.#runs.get(event.agentId) === event.containerId) this.#runs.delete(event.agentId)
        this.#ready.delete(event.agentId)
        // A boot starts cold; a restore goes on from the checkpointed run.
        if (!event.restored) this.#hadTurn.delete(event.agentId)
        break
      case 'exited':
      case 'restarting':
        this.#ready.delete(event.agentId)
        break
      case 'error':
        this.#ready.delete(event.agentId)
        this.#capacity.booted(event.agentId)
        this.#capacity.release(event.agentId)
        break
      case 'stopped':
        this.#ready.delete(event.agentId)
        this.#capacity.booted(event.agentId)
        this.#capacity.release(event.agentId)
        if (this.#sleeping.delete(event.agentId)) {
          return { type: 'sleeping', agentId: event.agentId, at: event.at }
        }
        break
    }
    return event
  }

  #emit(raw: RuntimeEvent) {
    const event = this.#track(raw)
    phaseFromEvent(event)
    if (event.type === 'error' || event.type === 'exited') {
      this.options.log?.('warn', `agent ${event.agentId}: ${event.type}`, {
        reason: 'reason' in event ? event.reason : event.message,
      })
    }
    for (const listener of this.#listeners) {
      try {
        listener(event)
      } catch (error) {
        this.options.log?.('error', `runtime event listener failed: ${(error as Error).message}`)
      }
    }
  }

  /**
   * Subscribes to started / ready / exited / restarting / error / stopped.
   * The agents layer writes feed events from these and sets the agent's
   * status to `error` on `error`. Returns the unsubscribe function.
   */
  onEvent(listener: RuntimeEventListener): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  async #gatewayToken(agentId: string) {
    const paths = agentPaths(this.options.agentsDir, agentId)
    await ensureServiceFolder(paths)
    return gatewayTokenFor(paths.credentialsFile)
  }

  async #create(spec: AgentRuntimeSpec, containerId?: string): Promise<ContainerInfo> {
    const plugin = this.options.frameworks.framework(spec.framework)
    const gatewayToken = await this.#gatewayToken(spec.agentId)
    this.#secrets.set(
      spec.agentId,
      secretValues(spec.config, '', new Set([gatewayToken, spec.modelProxy.token]))
    )
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
    const { info } = await this.#startOrAdopt(spec, options.runId, options.priority)
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
    if (!options.fresh) {
      const scheduled = this.#runs.get(agentId)
      if (scheduled) return scheduled
      const info = await this.driver.inspect(agentId)
      const live = info.state === 'running' || info.state === 'starting'
      if (live && info.containerId && !this.#unwanted.has(agentId)) {
        this.#runs.set(agentId, info.containerId)
        return info.containerId
      }
    }
    const prefix = this.driver.name === 'process' ? 'proc' : this.driver.name
    const runId = `${prefix}-${randomBytes(6).toString('hex')}`
    this.#runs.set(agentId, runId)
    return runId
  }

  /** No run is wanted any more (a stop): a start waiting for its turn boots nothing. */
  cancelRun(agentId: string): void {
    this.#runs.delete(agentId)
    this.#unwanted.add(agentId)
    this.cancelQueuedStart(agentId)
  }

  /** Throws BootCancelledError when `runId` was scheduled and is no longer the one wanted. */
  #assertWanted(agentId: string, runId: string | undefined) {
    if (runId !== undefined && this.#runs.get(agentId) !== runId) throw new BootCancelledError()
  }

  async #startOrAdopt(
    spec: AgentRuntimeSpec,
    runId?: string,
    priority?: BootPriority
  ): Promise<{ info: ContainerInfo; adopted: boolean }> {
    try {
      return await this.#startOrAdoptRun(spec, runId, priority)
    } catch (error) {
      if (runId !== undefined && this.#runs.get(spec.agentId) === runId) {
        this.#runs.delete(spec.agentId)
      }
      throw error
    }
  }

  async #startOrAdoptRun(
    spec: AgentRuntimeSpec,
    runId: string | undefined,
    priority: BootPriority | undefined
  ): Promise<{ info: ContainerInfo; adopted: boolean }> {
    const plugin = this.options.frameworks.framework(spec.framework)
    const reservedMb = spec.resources?.memoryMb ?? plugin.resources.memoryMb
    enterPhase(spec.agentId, 'preparing')
    this.#assertWanted(spec.agentId, runId)
    const created = await this.#create(spec, runId)
    if (
      created.state === 'running' ||
      created.state === 'starting' ||
      created.state === 'restarting'
    ) {
      // Already running (adopted after a service restart, or started meanwhile):
      // counted against the budget, and `running` once it answers. Its own id stands.
      if (runId !== undefined && this.#runs.get(spec.agentId) === runId) {
        this.#runs.delete(spec.agentId)
      }
      this.#capacity.adopt(spec.agentId, reservedMb)
      if (!this.#ready.has(spec.agentId)) {
        this.waitUntilReady(spec.agentId).catch((error) => this.#watchSlowBoot(spec.agentId, error))
      }
      return { info: created, adopted: true }
    }
    // Waits in the boot queue until a boot slot and its memory are free. Whether the
    // start resumes a checkpoint (a wake; a template restore would say so here too)
    // is the driver's to tell: such starts go before cold boots of their class.
    this.#assertWanted(spec.agentId, runId)
    const resumes = this.driver.resumes?.(spec.agentId) === true
    enterPhase(spec.agentId, 'queued')
    await this.#capacity.admit(spec.agentId, reservedMb, {
      resumes,
      owner: spec.ownerId,
      priority,
    })
    enterPhase(spec.agentId, resumes ? 'restoring' : 'booting')
    let info: ContainerInfo
    try {
      // Stopped or restarted while it waited for its turn: no boot.
      this.#assertWanted(spec.agentId, runId)
      info = await this.driver.start(spec.agentId)
    } catch (error) {
      this.#capacity.release(spec.agentId)
      throw error
    }
    this.#watchBoot(spec.agentId)
    return { info, adopted: false }
  }

  /** Holds the boot slot until the framework is ready (or its boot failed), then frees it. */
  #watchBoot(agentId: string) {
    this.waitUntilReady(agentId)
      .catch((error) => this.#watchSlowBoot(agentId, error))
      .finally(() => this.#capacity.booted(agentId))
  }

  /**
   * A framework past the readiness timeout (a loaded host) frees its boot
   * slot but is still watched, so it shows `running` once it answers
   * instead of `starting` for good.
   */
  #watchSlowBoot(agentId: string, error: unknown) {
    if (!(error instanceof ServiceUnavailableException)) return
    this.waitUntilReady(agentId, { timeoutMs: SLOW_BOOT_WATCH_MS }).catch(() => {})
  }

  /**
   * Scale to zero: stops the container and keeps everything it has on
   * disk; reported as a `sleeping` event. The next start wakes it.
   */
  async sleep(agentId: string, options: { warmUp?: boolean } = {}): Promise<void> {
    this.#sleeping.add(agentId)
    const beforeCheckpoint = options.warmUp === false ? undefined : () => this.#warmUp(agentId)
    try {
      await (this.driver.hibernate
        ? this.driver.hibernate(agentId, { beforeCheckpoint })
        : this.driver.stop(agentId))
    } finally {
      // A stop that emitted no event (nothing ran) leaves no mark behind.
      this.#sleeping.delete(agentId)
      this.#capacity.release(agentId)
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
    if (this.#hadTurn.has(agentId) || !this.#ready.has(agentId)) return
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
  async prepareFrameworks(plugins: FrameworkPlugin[]): Promise<void> {
    await this.driver.prepareFrameworks?.(plugins)
  }

  /** Takes the agent out of the boot queue; its waiting start fails with BootCancelledError. */
  cancelQueuedStart(agentId: string): void {
    if (this.#capacity.isQueued(agentId)) this.#capacity.release(agentId)
  }

  /**
   * A message for the agent: the capacity manager puts it to sleep last,
   * and a start of it waiting as background (a new agent not yet booted)
   * becomes interactive, keeping its place among its account's starts.
   */
  touch(agentId: string): void {
    this.#capacity.touch(agentId)
    this.prioritize(agentId)
  }

  /**
   * Someone waits on the agent's start now (a message, its owner's start):
   * a start of it waiting as background, or scheduled and not yet queued,
   * is admitted as interactive.
   */
  prioritize(agentId: string): void {
    if (this.#capacity.isQueued(agentId) || this.#runs.has(agentId)) {
      this.#capacity.prioritize(agentId)
    }
  }

  /** Its 1-based place in the boot queue while it waits there (`container: queued`), else null. */
  queuePosition(agentId: string): number | null {
    return this.#capacity.queuePosition(agentId)
  }

  /** Agents whose containers run or boot here, least recently active first. */
  admittedAgents() {
    return this.#capacity.admittedAgents()
  }

  /** Boot queue and memory budget as they stand (console, /stats). */
  capacity(): CapacitySnapshot {
    return this.#capacity.snapshot()
  }

  /** Where the agent's container stands, in the words of the API's `container` field. */
  async containerView(agentId: string): Promise<ContainerView> {
    if (this.#capacity.isQueued(agentId)) return 'queued'
    const info = await this.driver.inspect(agentId)
    switch (info.state) {
      case 'running':
        return this.#ready.has(agentId) ? 'running' : 'starting'
      case 'starting':
      case 'restarting':
        return 'starting'
      case 'error':
        return 'error'
      default:
        return 'stopped'
    }
  }

  /** Stops then starts it with a freshly rendered config; the container id changes. */
  async restart(spec: AgentRuntimeSpec, options: StartOptions = {}): Promise<ContainerInfo> {
    this.#assertWanted(spec.agentId, options.runId)
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
      this.#unwanted.delete(agentId)
    }
  }

  /** Stops it and deletes its container and every file it had. Irreversible. */
  async remove(agentId: string): Promise<void> {
    await this.driver.remove(agentId)
    this.#unwanted.delete(agentId)
    this.#secrets.delete(agentId)
    this.#hadTurn.delete(agentId)
  }

  /** The driver's view, with the id of a run scheduled but not yet up (planRun). */
  async status(agentId: string): Promise<ContainerInfo> {
    const info = await this.driver.inspect(agentId)
    return { ...info, containerId: this.#runs.get(agentId) ?? info.containerId }
  }

  async isRunning(agentId: string): Promise<boolean> {
    const info = await this.driver.inspect(agentId)
    return info.state === 'running'
  }

  async #requireRunning(agentId: string): Promise<ContainerInfo> {
    const info = await this.driver.inspect(agentId)
    if (info.state !== 'running' || !info.baseUrl || !info.framework) {
      throw new AgentNotRunningException()
    }
    return info
  }

  /** Uptime and container id (the chat area adds messagesProcessed and lastActiveAt). */
  async stats(agentId: string): Promise<RuntimeStats> {
    const info = await this.driver.inspect(agentId)
    const uptimeSecs =
      info.state === 'running' && info.startedAt
        ? Math.max(0, Math.floor((Date.now() - info.startedAt.getTime()) / 1000))
        : 0
    return {
      status: info.state,
      containerId: this.#runs.get(agentId) ?? info.containerId,
      uptimeSecs,
    }
  }

  /** CPU, memory, limit and restart count of a running container. */
  async monitoring(agentId: string): Promise<MonitoringFigures> {
    const info = await this.#requireRunning(agentId)
    const usage = await this.driver.usage(agentId)
    return { ...usage, restartCount: info.restartCount, status: 'running' }
  }

  #redact(agentId: string, line: string): string {
    let clean = line
    for (const secret of this.#secrets.get(agentId) ?? []) clean = clean.replaceAll(secret, '***')
    return clean
  }

  /** The last `tail` lines (default 100) as plain text; also for a stopped agent. */
  async logs(agentId: string, options: { tail?: number } = {}): Promise<string> {
    const tail = Math.max(0, Math.min(options.tail ?? 100, 10_000))
    const lines = await this.driver.logs(agentId, tail)
    return lines.map((line) => this.#redact(agentId, line)).join('\n')
  }

  /**
   * Live output line by line (for SSE), after the last `tail` lines (default
   * 0), until `signal` aborts. Only for a running agent.
   */
  async followLogs(
    agentId: string,
    options: { tail?: number; signal?: AbortSignal } = {}
  ): Promise<AsyncIterable<string>> {
    const redact = (line: string) => this.#redact(agentId, line)
    const info = await this.driver.inspect(agentId)
    if (info.state === 'running') {
      const lines = this.driver.followLogs(agentId, options)
      return (async function* () {
        for await (const line of lines) yield redact(line)
      })()
    }
    // Queued, starting or asleep (the owner wants it on; CONTRACT: no 409):
    // the stored tail now, then the live lines once its container runs.
    const driver = this.driver
    const stored = await driver
      .logs(agentId, Math.max(0, options.tail ?? 0))
      .catch((): string[] => [])
    const signal = options.signal
    return (async function* () {
      for (const line of stored) yield redact(line)
      while (!signal?.aborted) {
        await sleep(LOG_FOLLOW_POLL_MS, undefined, { signal }).catch(() => undefined)
        if (signal?.aborted) return
        const now = await driver.inspect(agentId)
        if (now.state === 'running') break
      }
      // Catch up on what it wrote between its start and this look (lines carry
      // timestamps, so the last line seen marks where the stored tail ended).
      const recent = await driver.logs(agentId, LOG_CATCH_UP_LINES).catch((): string[] => [])
      const lastSeen = stored.length ? recent.lastIndexOf(stored[stored.length - 1]) : -1
      const missed = recent.length - lastSeen - 1
      for await (const line of driver.followLogs(agentId, { tail: missed, signal })) {
        yield redact(line)
      }
    })()
  }

  /** The workspace file manager of a running agent. */
  async files(agentId: string): Promise<WorkspaceFiles> {
    await this.#requireRunning(agentId)
    return this.#withQuota(agentId, this.driver.files(agentId))
  }

  #workspaceDir(agentId: string): string {
    return agentPaths(this.options.agentsDir, agentId).workspace
  }

  get #workspaceQuotaBytes(): number | undefined {
    const mb = this.options.capacity?.workspaceQuotaMb
    return mb ? mb * 1024 * 1024 : undefined
  }

  #withQuota(agentId: string, files: WorkspaceFiles): WorkspaceFiles {
    const quota = this.#workspaceQuotaBytes
    return quota ? withWorkspaceQuota(files, this.#workspaceDir(agentId), quota) : files
  }

  /** True when the agent's own writes took its workspace past the quota. */
  async workspaceOverQuota(agentId: string): Promise<boolean> {
    const quota = this.#workspaceQuotaBytes
    return quota ? overQuota(this.#workspaceDir(agentId), quota) : false
  }

  /** 400 when the agent's workspace is over its quota (it may not start until it is not). */
  async assertWorkspaceStartable(agentId: string): Promise<void> {
    const quota = this.#workspaceQuotaBytes
    if (quota) await assertStartable(this.#workspaceDir(agentId), quota)
  }

  /**
   * The workspace of an agent that is asleep (its container stopped, its
   * folders on disk), without waking it. The agents area decides who may.
   */
  filesAtRest(agentId: string): WorkspaceFiles {
    return this.#withQuota(agentId, this.driver.files(agentId))
  }

  /** The memory store of an agent that is asleep, read from disk. */
  memoryAtRest(agentId: string, framework: string): Promise<Record<string, string>> {
    return this.options.frameworks.framework(framework).readMemory(this.driver.reader(agentId))
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

  /** `{ memory }`: the framework's memory store, read by its plugin. */
  async memory(agentId: string): Promise<Record<string, string>> {
    const info = await this.#requireRunning(agentId)
    const plugin = this.options.frameworks.framework(info.framework!)
    return plugin.readMemory(this.driver.reader(agentId))
  }

  /**
   * Resolves once the framework answers 2xx on its readiness path. Throws
   * AgentNotRunningException when the container stops or is given up on
   * meanwhile, ServiceUnavailableException after the timeout.
   */
  async waitUntilReady(
    agentId: string,
    options: { timeoutMs?: number; signal?: AbortSignal } = {}
  ): Promise<void> {
    const timeoutMs = options.timeoutMs ?? this.options.readinessTimeoutMs ?? 180_000
    const deadline = Date.now() + timeoutMs
    while (Date.now() < deadline) {
      options.signal?.throwIfAborted()
      const info = await this.driver.inspect(agentId)
      if (info.state === 'error' || info.state === 'stopped' || info.state === 'absent') {
        throw new AgentNotRunningException(
          info.lastError ? `The agent is not running: ${info.lastError}` : undefined
        )
      }
      if (info.state === 'running' && info.baseUrl && info.framework) {
        const plugin = this.options.frameworks.framework(info.framework)
        try {
          const response = await fetch(`${info.baseUrl}${plugin.readinessPath}`, {
            signal: AbortSignal.timeout(3000),
          })
          await response.body?.cancel()
          if (response.ok) {
            this.#emit({ type: 'ready', agentId, containerId: info.containerId, at: new Date() })
            return
          }
        } catch {
          // Not listening yet.
        }
      }
      await sleep(250)
    }
    throw new ServiceUnavailableException(
      `The agent did not become ready within ${Math.round(timeoutMs / 1000)}s`
    )
  }

  async #chatTarget(agentId: string): Promise<ChatTarget> {
    const info = await this.#requireRunning(agentId)
    const plugin = this.options.frameworks.framework(info.framework!)
    const endpoint = plugin.chatEndpoint({
      agentId,
      gatewayToken: await this.#gatewayToken(agentId),
    })
    return {
      url: `${info.baseUrl}${endpoint.path}`,
      headers: endpoint.headers,
      model: endpoint.model,
    }
  }

  /**
   * One reply from the agent's own framework (its /v1/chat/completions).
   * AgentNotRunningException when not running; ContainerChatError when the
   * framework fails (the chat area then falls back to the hosted path).
   */
  async chat(agentId: string, request: ContainerChatRequest): Promise<ContainerChatReply> {
    const reply = await chatOnce(await this.#chatTarget(agentId), request, {
      replyTimeoutMs: this.options.chatTimeoutMs,
    })
    this.#hadTurn.add(agentId)
    return reply
  }

  /** The same, streamed: yields `{ token }` chunks and returns the whole reply. */
  async *chatStream(
    agentId: string,
    request: ContainerChatRequest
  ): AsyncGenerator<ContainerChatChunk, ContainerChatReply> {
    const target = await this.#chatTarget(agentId)
    const reply = yield* chatStream(target, request, { replyTimeoutMs: this.options.chatTimeoutMs })
    this.#hadTurn.add(agentId)
    return reply
  }

  /**
   * At service boot: for every agent that should be running, adopt its live
   * container or start it again; stop containers of agents that no longer
   * exist. Failures are reported per agent, never thrown.
   */
  async recover(
    specs: AgentRuntimeSpec[],
    options: {
      sweep?: boolean
      /** Runs each agent's start (the agents area orders it with the agent's other operations). */
      each?: (agentId: string, start: () => Promise<void>) => Promise<void>
    } = {}
  ): Promise<{
    adopted: string[]
    started: string[]
    failed: Array<{ agentId: string; error: string }>
    swept: string[]
  }> {
    const result = {
      adopted: [] as string[],
      started: [] as string[],
      failed: [] as Array<{ agentId: string; error: string }>,
      swept: [] as string[],
    }
    if (options.sweep !== false) {
      result.swept = await this.driver.sweep(specs.map((spec) => spec.agentId))
    }
    const each = options.each ?? ((_agentId, start) => start())
    // Through the capacity manager like any start: a restart of the service
    // boots its agents a few at a time within the memory budget, not all at once.
    await Promise.all(
      specs.map(async (spec) => {
        // A planned run, like an owner's start: a stop or delete arriving meanwhile cancels it.
        const runId = await this.planRun(spec.agentId)
        try {
          await each(spec.agentId, async () => {
            // Background: nobody waits on it yet (a message makes it interactive).
            const { adopted } = await this.#startOrAdopt(spec, runId, 'background')
            ;(adopted ? result.adopted : result.started).push(spec.agentId)
          })
        } catch (error) {
          // Stopped or removed while it waited: not a failure.
          if (error instanceof BootCancelledError) return
          result.failed.push({ agentId: spec.agentId, error: (error as Error).message })
        }
      })
    )
    return result
  }

  /** Service shutdown, first step: the process driver's agents stop (engines' keep running). */
  async stopAgents(): Promise<void> {
    // Starts waiting for a boot slot boot nothing now.
    this.#runs.clear()
    this.#capacity.cancelQueued()
    await this.driver.stopAll?.()
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
