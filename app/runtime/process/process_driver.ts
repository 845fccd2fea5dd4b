import { existsSync } from 'node:fs'
import { join } from 'node:path'
import {
  AgentNotRunningException,
  NotFoundException,
  ServiceUnavailableException,
} from '#core/exceptions/api_exceptions'
import type { AgentFileReader, FrameworkPlugin } from '#plugins/types'
import { agentPaths, ensureAgentFolders, removeAgentFolders } from '#runtime/agent_paths'
import { AgentProcess, type HibernateRun } from '#runtime/process/agent_process'
import type { SupervisorSettings } from '#runtime/process/prepared_launch'
import { agentFileReader, agentWorkspaceFiles, syncSkillFiles } from '#runtime/process/agent_files'
import { AgentLocks } from '#runtime/process/agent_locks'
import { AgentCheckpoint } from '#runtime/process/checkpoint'
import { compiledFilesDir } from '#runtime/process/compiled_c'
import { CheckpointBudget } from '#runtime/process/checkpoint_budget'
import { CheckpointStores } from '#runtime/process/checkpoint_stores'
import type { TemplateCounts } from '#runtime/process/template'
import { TemplateStarter } from '#runtime/process/template_starter'
import { FrameworkInstalls } from '#runtime/process/framework_installs'
import { LaunchPreparer } from '#runtime/process/launch_preparation'
import { LogFile } from '#runtime/process/log_file'
import { allocatePort, portsTakenBy } from '#runtime/process/ports'
import { AgentNetworking } from '#runtime/process/agent_network/agent_networking'
import {
  hostFoldersOf,
  supervisorSettings,
  type ProcessDriverOptions,
} from '#runtime/process/process_driver_options'
import { RuntimeEventFanOut } from '#runtime/runtime_events'
import {
  adoptableRecord,
  inspectAgent,
  releaseAgentCgroup,
  stopAllAtShutdown,
  stopRecordedRun,
  sweepAgents,
} from '#runtime/process/unsupervised_processes'
import type {
  ContainerDriver,
  ContainerInfo,
  ContainerUsage,
  CreateRequest,
  HibernateOptions,
  NewAgentSpec,
  RuntimeEvent,
  RuntimeEventListener,
  SkillChange,
  WorkspaceFiles,
} from '#runtime/types'

/** An agent's captured output before it is rotated. */
const LOG_MAX_BYTES = 5 * 1024 * 1024

/**
 * `AGENT_SLEEP_AS_NEW=off`: a run still as its template started it is checkpointed like any
 * other when it sleeps (bench:density --burst's `fair-checkpoint-all` baseline).
 */
const SLEEPS_AS_NEW = process.env.AGENT_SLEEP_AS_NEW !== 'off'

/**
 * The `process` driver: each agent's framework is a supervised child
 * process of the service host, with its own folder, port and environment.
 * Processes survive a restart of the service and are adopted by the next
 * one (see ProcessRecord). The container id is `proc-<random>`, new each start.
 *
 * Its parts: the launch of each agent (launch_preparation.ts), the
 * frameworks' installs (framework_installs.ts), template starts and builds
 * (template_starter.ts), the checkpoints' disk budget (checkpoint_budget.ts)
 * and one supervised process per agent (agent_process.ts).
 */
export class ProcessDriver implements ContainerDriver {
  readonly name = 'process' as const
  readonly #agents = new Map<string, AgentProcess>()
  readonly #events = new RuntimeEventFanOut((error) =>
    this.#log(`runtime event listener failed: ${error.message}`)
  )
  readonly #locks = new AgentLocks()
  readonly #checkpoints: CheckpointBudget
  readonly #stores = new CheckpointStores()
  /** Set by stopAll: the service is stopping and starts nothing more. */
  #stopping = false
  readonly #installs: FrameworkInstalls
  readonly #launches: LaunchPreparer
  readonly #settings: SupervisorSettings
  readonly #network: AgentNetworking
  readonly #templates: TemplateStarter

  constructor(private readonly options: ProcessDriverOptions) {
    const log = (message: string) => this.#log(message)
    const nodeExecutable = options.nodeExecutable ?? process.execPath
    this.#network = new AgentNetworking(options.network, log, join(options.cacheDir, 'relays'))
    const compileCache = options.compileCache !== false
    this.#installs = new FrameworkInstalls({ ...options, nodeExecutable, compileCache, log })
    this.#launches = new LaunchPreparer({
      ...options,
      nodeExecutable,
      network: this.#network,
      installs: this.#installs,
      log,
      warn: this.#warn,
    })
    this.#checkpoints = new CheckpointBudget({ ...options, log })
    this.#templates = new TemplateStarter({
      agentsDir: options.agentsDir,
      shapeOf: (plugin, config) => this.#launches.templateShape(plugin, config),
      stopping: () => this.#stopping,
      log: (message, detail) => this.#log(message, detail),
      runs: {
        create: (request, key) =>
          this.#exclusive(request.spec.agentId, () => this.#create(request, { key })),
        start: (agentId) => this.start(agentId),
        agent: (agentId) => this.#agent(agentId),
        hibernate: (agentId) =>
          this.#exclusive(agentId, () => this.#agent(agentId).hibernate({ uncompressed: true })),
        remove: async (agentId) => {
          await this.remove(agentId).catch(() => undefined)
          await this.#network.teardown(agentId)
        },
        answerModelCallsOf: (modelProxy) => this.#network.answerModelCallsOf(modelProxy),
      },
    })
    this.#settings = supervisorSettings(options, () => this.#stopping)
  }

  #log = (message: string, detail?: Record<string, unknown>) => this.options.log?.(message, detail)
  #warn = (message: string) => (this.options.warn ?? this.#log)(message)

  #emit = (event: RuntimeEvent) => {
    if (!this.#templates.isTemplateRun(event.agentId)) this.#events.emit(event)
  }

  /** Runs one operation per agent at a time (a boot-time adopt and a user's start may race). */
  #exclusive<T>(agentId: string, work: () => Promise<T>): Promise<T> {
    return this.#locks.exclusive(agentId, work)
  }

  #paths(agentId: string) {
    return agentPaths(this.options.agentsDir, agentId)
  }

  onEvent(listener: RuntimeEventListener): () => void {
    return this.#events.onEvent(listener)
  }

  create(request: CreateRequest): Promise<ContainerInfo> {
    return this.#exclusive(request.spec.agentId, () => this.#create(request))
  }

  /**
   * `template`: the run a template is taken of (TemplateStarter), not an
   * agent's: it never starts from a template itself.
   */
  async #create(
    { spec, plugin, gatewayToken, containerId }: CreateRequest,
    template?: { key: string }
  ): Promise<ContainerInfo> {
    const paths = this.#paths(spec.agentId)
    // A new agent: never started by this run of the service, nor by a previous one (no output).
    const known = this.#agents.get(spec.agentId)
    // Or one whose last run was still its template when it slept (AgentProcess.sleepAsNew).
    const fresh =
      (known ? known.neverStarted : !existsSync(paths.logFile)) || existsSync(paths.startsAsNewFile)
    await ensureAgentFolders(paths)

    let agent = this.#agents.get(spec.agentId)
    // Not live here: a process a previous run of the service left is adopted.
    const adoptable = agent?.isLive()
      ? undefined
      : await adoptableRecord(spec.agentId, paths.recordFile, (message) => this.#log(message))

    // A live process keeps its port: its rendered config must not move it. A
    // checkpoint listens where it was taken: a wake restores it only there.
    const checkpoint = this.#checkpoint(spec.agentId)
    const checkpointMeta = await checkpoint.meta()
    // The fixed layout: the same folders and port for every agent (its own network namespace).
    const fixed = this.#launches.fixedLayout(plugin)
    const shape = fixed ? plugin.template?.shape(spec.config) : undefined
    const port =
      (fixed ? plugin.defaultPort : undefined) ??
      (agent?.isLive() ? agent.port : undefined) ??
      adoptable?.port ??
      (await allocatePort({
        preferred: agent?.port ?? checkpointMeta?.port,
        taken: portsTakenBy(this.#agents, spec.agentId),
      }))

    const { prepared, templateFingerprint: fingerprint } = await this.#launches.prepare({
      request: { spec, plugin, gatewayToken },
      paths,
      port,
      fixed,
      shape,
      checkpoint,
      logFile: agent?.logFile ?? new LogFile(paths.logFile),
    })
    if (!agent) {
      const logMaxBytes = this.options.logMaxBytes ?? LOG_MAX_BYTES
      agent = new AgentProcess(spec.agentId, paths, this.#settings, this.#emit, logMaxBytes)
      this.#agents.set(spec.agentId, agent)
    }
    agent.prepared = prepared
    this.#templates.wire({
      spec,
      plugin,
      agent,
      gatewayToken,
      shape,
      fingerprint,
      asTemplate: template !== undefined,
      newAgent: fresh && !adoptable,
    })
    // A live run keeps its id; the next one takes the id scheduled for it.
    agent.nextContainerId = agent.isLive() || adoptable ? undefined : containerId
    if (adoptable) {
      agent.adopt(adoptable)
      this.#log(`adopted agent ${spec.agentId} process ${adoptable.pid}`)
    }
    return agent.info()
  }

  /** Template starts and counted cold boots of new agents since this driver began. */
  templateCounts = (): TemplateCounts => this.#templates.counts()

  /** Builds (or rebuilds) the template agents like `spec` start from, now; false if none. */
  prepareTemplate = (spec: CreateRequest['spec'], plugin: FrameworkPlugin): Promise<boolean> =>
    this.#templates.prepare(spec, plugin)

  /** Until the templates being built now are built (or failed). */
  whenTemplatesBuilt = (): Promise<void> => this.#templates.whenBuilt()

  #agent(agentId: string): AgentProcess {
    const agent = this.#agents.get(agentId)
    if (!agent) throw new NotFoundException(`Agent ${agentId} has no container`)
    return agent
  }

  start(agentId: string): Promise<ContainerInfo> {
    return this.#exclusive(agentId, async () => {
      if (this.#stopping) throw new ServiceUnavailableException('The service is shutting down')
      const agent = this.#agent(agentId)
      // A stop or sleep took its namespace away: made again (the same name, maybe another address).
      if (agent.prepared && !agent.isLive()) {
        agent.prepared.gatewayHost = (await this.#network.restore(agentId)) ?? undefined
      }
      await agent.start()
      return agent.info()
    })
  }

  /**
   * Sleep: checkpoints the agent's processes to disk where this host can,
   * so that the next start restores them; otherwise (or when the checkpoint
   * fails) stops it like stop().
   */
  async hibernate(agentId: string, options: HibernateOptions = {}): Promise<void> {
    const agent = this.#agents.get(agentId)
    if (options.untouched && SLEEPS_AS_NEW && agent?.startedFromTemplate) {
      const asNew = await this.#exclusive(agentId, async () => {
        if (!(await agent.sleepAsNew())) return false
        await this.#ended(agentId)
        return true
      })
      if (asNew) return
    }
    const room =
      agent?.canHibernate() === true && (await this.#checkpoints.diskHolds(agent.privateBytes()))
    if (room) await options.beforeCheckpoint?.()
    await this.#exclusive(agentId, async () => {
      // Reported stopped once its processes end (CheckpointStores): its memory is free for
      // the next start, while the lock holds a start of its own until it is stored.
      const hibernate = (run: HibernateRun) => agent!.hibernate(run)
      const ended = () => this.#ended(agentId)
      const slept = room && agent?.isLive() && (await this.#stores.sleep(agentId, hibernate, ended))
      if (!slept) return this.#stop(agentId)
    })
    if (room) await this.#checkpoints.keepWithinBudget(agentId, this.#locks)
  }

  /**
   * Installs each framework and warms what its agents share (an agent's start waits for the
   * same install), then builds the template of a default new agent (TemplateStarter.buildAhead),
   * all at once: Hermes' long install must not hold back OpenClaw's. A failure is logged.
   */
  async prepareFrameworks(plugins: FrameworkPlugin[], newAgentSpec?: NewAgentSpec) {
    const prepare = async (plugin: FrameworkPlugin) => {
      const installed = await this.#installs.prepare(plugin)
      if (installed && plugin.template && newAgentSpec) {
        await this.#templates.buildAhead(newAgentSpec(plugin), plugin)
      }
    }
    await Promise.all(plugins.map(prepare))
  }

  /** A backup's quiesce: `work` runs with the agent's processes frozen (AgentProcess.whileFrozen). */
  whileFrozen<T>(agentId: string, work: () => Promise<T>) {
    const refused = (why: string) => this.#warn(`agent ${agentId} could not be frozen: ${why}`)
    return this.#exclusive(agentId, async () =>
      this.#agents.get(agentId)?.whileFrozen(work, refused)
    )
  }

  hostFolders = async (agentId: string) => hostFoldersOf(this.options.agentsDir, agentId)

  /** Its start restores: its checkpoint (stored or being stored), or its template again. */
  resumes(agentId: string): boolean {
    return (
      this.#stores.storing(agentId) ||
      existsSync(this.#checkpoint(agentId).metaFile) ||
      existsSync(this.#paths(agentId).startsAsNewFile)
    )
  }

  /** Where the agent's checkpoint lives (there or not). */
  #checkpoint(agentId: string): AgentCheckpoint {
    const paths = this.#paths(agentId)
    return new AgentCheckpoint(
      paths.checkpoint,
      paths.templateCopy,
      compiledFilesDir(this.options.cacheDir)
    )
  }

  stop(agentId: string): Promise<void> {
    return this.#exclusive(agentId, () => this.#stop(agentId))
  }

  /** Its run's processes have ended: its namespace goes, and it is reported stopped. */
  async #ended(agentId: string): Promise<void> {
    await this.#network.teardown(agentId)
    this.#emit({ type: 'stopped', agentId, at: new Date() })
  }

  async #stop(agentId: string): Promise<void> {
    const agent = this.#agents.get(agentId)
    if (agent?.isLive()) {
      await agent.stop()
      return this.#ended(agentId)
    }
    // Not supervised here (by this run of the service, or another instance that died
    // holding it): stop what the record names.
    await stopRecordedRun(this.#paths(agentId).recordFile, this.#settings.stopGraceMs)
    await agent?.stop()
    await this.#network.teardown(agentId)
    await releaseAgentCgroup(agentId)
  }

  async remove(agentId: string): Promise<void> {
    await this.stop(agentId)
    await this.#exclusive(agentId, async () => {
      this.#agents.get(agentId)?.detach()
      this.#agents.delete(agentId)
      await removeAgentFolders(this.#paths(agentId))
    })
  }

  async inspect(agentId: string): Promise<ContainerInfo> {
    return inspectAgent(agentId, this.#agents.get(agentId), this.#paths(agentId))
  }

  /** Agents whose runs this driver supervises now (a template build's run is nobody's: no lease). */
  liveAgents(): string[] {
    const isAgent = (id: string) => !this.#templates.isTemplateRun(id)
    return [...this.#agents].filter(([id, run]) => run.isLive() && isAgent(id)).map(([id]) => id)
  }

  /** Stops supervising the agent and leaves its processes running (another instance takes it). */
  detach(agentId: string): void {
    this.#agents.get(agentId)?.detach()
    this.#agents.delete(agentId)
  }

  async usage(agentId: string): Promise<ContainerUsage> {
    const agent = this.#agents.get(agentId)
    if (!agent || agent.state !== 'running') throw new AgentNotRunningException()
    return agent.usage()
  }

  async logs(agentId: string, tail: number): Promise<string[]> {
    return new LogFile(this.#paths(agentId).logFile).tail(tail)
  }

  followLogs(agentId: string, options: { tail?: number; signal?: AbortSignal }) {
    return new LogFile(this.#paths(agentId).logFile).follow(options)
  }

  files(agentId: string): WorkspaceFiles {
    return agentWorkspaceFiles(this.options.agentsDir, this.options.cacheDir, agentId)
  }

  reader(agentId: string): AgentFileReader {
    return agentFileReader(this.options.agentsDir, agentId)
  }

  syncSkills(agentId: string, plugin: FrameworkPlugin, change: SkillChange): Promise<void> {
    return this.#exclusive(agentId, () =>
      syncSkillFiles(this.#paths(agentId), agentId, plugin, change)
    )
  }

  async sweep(keepAgentIds: string[]): Promise<string[]> {
    return sweepAgents({
      agentsDir: this.options.agentsDir,
      keepAgentIds,
      supervised: {
        isLive: (agentId) => this.#agents.get(agentId)?.isLive() === true,
        stop: (agentId) => this.stop(agentId),
        forget: (agentId) => this.detach(agentId),
      },
      network: this.#network,
      log: (message) => this.#log(message),
    })
  }

  async close(): Promise<void> {
    for (const agent of this.#agents.values()) agent.detach()
    this.#agents.clear()
    await this.#network.close()
  }

  /**
   * Service shutdown, bounded (about 17 s with the default grace): launches
   * nothing more (a boot, wake or crash restart under way launches no
   * process now), then stopAllAtShutdown: operations under way end, every
   * agent stops, leftovers carrying an agent marker are killed (but those
   * of agents `spare` names: other instances of the host hold them).
   */
  async stopAll(options: { spare?: (agentId: string) => boolean } = {}): Promise<void> {
    this.#stopping = true
    await stopAllAtShutdown({
      operations: this.#locks.pending(),
      stops: () => [...this.#agents.keys()].map((agentId) => this.stop(agentId)),
      graceMs: this.#settings.stopGraceMs,
      agentsDir: this.options.agentsDir,
      spare: options.spare,
      log: (message) => this.#log(message),
    })
  }
}
