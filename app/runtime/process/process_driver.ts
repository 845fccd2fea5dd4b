import { enterPhase } from '#runtime/boot_phases'
import { createHash } from 'node:crypto'
import { existsSync, readdirSync } from 'node:fs'
import { chmod, mkdir, readdir, rm, statfs, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import {
  AgentNotRunningException,
  NotFoundException,
  ServiceUnavailableException,
} from '#core/exceptions/api_exceptions'
import type { AgentFileReader, FrameworkPlugin, RenderedFile } from '#plugins/types'
import { agentPaths, ensureAgentFolders, type AgentPaths } from '#runtime/agent_paths'
import { LocalAgentReader, LocalWorkspaceFiles } from '#runtime/files/local_workspace'
import { resolveWorkspacePath } from '#runtime/files/workspace_path'
import { PackageCache } from '#runtime/package_cache'
import { PythonPackageCache } from '#runtime/python_cache'
import { renderedSkillFiles, skillFolder } from '#runtime/skill_files'
import {
  AgentProcess,
  killRecordedProcess,
  type RestartPolicy,
  type SupervisorSettings,
} from '#runtime/process/agent_process'
import { agentRunUid, agentUid, sandboxLaunch } from '#runtime/process/sandbox'
import { AgentCheckpoint, criu } from '#runtime/process/checkpoint'
import { ioUringFilterFile } from '#runtime/process/seccomp'
import { AgentCgroup, cgroupBases } from '#runtime/process/cgroups'
import { buildChildEnv } from '#runtime/process/child_env'
import { LogFile } from '#runtime/process/log_file'
import { allocatePort } from '#runtime/process/ports'
import {
  deleteRecord,
  isRecordedProcessAlive,
  killStrayProcesses,
  markedAgentIdsUnder,
  readRecord,
} from '#runtime/process/process_record'
import type {
  ContainerDriver,
  ContainerInfo,
  ContainerUsage,
  CreateRequest,
  HibernateOptions,
  RuntimeEvent,
  RuntimeEventListener,
  SkillChange,
  WorkspaceFiles,
} from '#runtime/types'

export interface ProcessDriverOptions {
  /** `<storage>/agents`: one folder per agent. */
  agentsDir: string
  /** `<storage>/runtime`: framework packages installed on first use. */
  cacheDir: string
  /** Node.js for frameworks that run on Node (default: the service's own). */
  nodeExecutable?: string
  /** Cap of the captured output file (one rotated copy is kept beside it). Default 5 MiB. */
  logMaxBytes?: number
  /** Time between SIGTERM and SIGKILL. Default 10 s. */
  stopGraceMs?: number
  /** How often each agent is checked (adopted processes, memory, log size). Default 1 s. */
  pollIntervalMs?: number
  restart?: Partial<RestartPolicy>
  /**
   * Frameworks seed each agent from a warm compile cache shared by all
   * agents (default true; AGENT_COMPILE_CACHE=off turns it off).
   */
  compileCache?: boolean
  /**
   * A sleep checkpoints the agent with CRIU where this host can
   * (app/runtime/process/checkpoint.ts; default true; AGENT_CHECKPOINT=off
   * turns it off).
   */
  checkpoints?: boolean
  /**
   * Disk all checkpoints may take together (AGENT_CHECKPOINT_DISK_MB);
   * default half the free space of the agents folder at the first sleep.
   */
  checkpointDiskMb?: number
  /** The service's log. */
  log?: (message: string, detail?: Record<string, unknown>) => void
}

const DEFAULT_RESTART: RestartPolicy = {
  baseDelayMs: 1000,
  maxDelayMs: 30_000,
  maxConsecutiveRestarts: 5,
  stableAfterMs: 60_000,
}

let rootFolders: string[] | undefined

/**
 * `/<name>` for every entry of the host's root folder: an absolute path that
 * names a real host location (`/work/app/.env`) is refused, never mapped
 * into the workspace.
 */
function hostRootFolders(): string[] {
  if (!rootFolders) {
    try {
      rootFolders = readdirSync('/').map((name) => `/${name}`)
    } catch {
      rootFolders = []
    }
  }
  return rootFolders
}

async function writeRenderedFiles(paths: AgentPaths, files: RenderedFile[]) {
  for (const file of files) {
    const checked = resolveWorkspacePath(file.path)
    if (!checked.relative) throw new Error(`Rendered file with an empty path (${file.root})`)
    const target = join(file.root === 'state' ? paths.state : paths.workspace, checked.relative)
    await mkdir(dirname(target), { recursive: true, mode: 0o700 })
    if (file.onlyIfMissing && existsSync(target)) continue
    await writeFile(target, file.content, { mode: file.mode ?? 0o644 })
    // writeFile keeps the mode of an existing file: make a secret file private again.
    await chmod(target, file.mode ?? 0o644)
  }
}

/**
 * The `process` driver: each agent's framework is a supervised child
 * process of the service host, with its own folder, port and environment.
 * Processes survive a restart of the service and are adopted by the next
 * one (see ProcessRecord). The container id is `proc-<random>`, new on
 * every start.
 */
let weakSandboxWarned = false

/** A runtime-cache install whose failure the caller sees as 503 (the host, not the request). */
async function installOr503<T>(label: string, install: () => Promise<T>): Promise<T> {
  try {
    return await install()
  } catch (error) {
    throw new ServiceUnavailableException(
      `Could not install ${label} into the runtime cache: ${(error as Error).message}`,
      { cause: error }
    )
  }
}

let limitsSaid = false

/** Said once per process: how agents' memory, CPU and process count are limited here. */
function sayLimits(withCgroups: boolean, log: (message: string) => void) {
  if (limitsSaid) return
  limitsSaid = true
  log(
    withCgroups
      ? 'agent limits: each agent in its own cgroup v1 memory, cpu and pids groups (agent-host/<agent id>)'
      : 'agent limits: cgroups are not writable here (needs root and cgroup v1 memory, cpu and pids): process count by RLIMIT_NPROC, memory by a watcher'
  )
}

let checkpointsSaid = false

/**
 * What a checkpoint was taken of: the framework, its launch, environment
 * and rendered files (config, skills). Hashed, as it holds secrets.
 */
function launchFingerprint(launch: {
  framework: string
  command: string
  args: string[]
  env: Record<string, string>
  rendered: RenderedFile[]
}): string {
  return createHash('sha256').update(JSON.stringify(launch)).digest('hex')
}

/** Said once per process: agents run without the mount-namespace sandbox here. */
function warnWeakSandbox(confinement: 'uid' | 'none', log: (message: string) => void) {
  if (weakSandboxWarned) return
  weakSandboxWarned = true
  log(
    confinement === 'uid'
      ? 'bubblewrap is not available: agents run under their own user ids but see the host file system (install the bubblewrap package)'
      : 'bubblewrap is not available and the service does not run as root: agents run as the service user with no sandbox'
  )
}

export class ProcessDriver implements ContainerDriver {
  readonly name = 'process' as const
  readonly #agents = new Map<string, AgentProcess>()
  readonly #listeners = new Set<RuntimeEventListener>()
  readonly #locks = new Map<string, Promise<unknown>>()
  /** Bytes all agents' checkpoints may take together (set at the first sleep). */
  #checkpointBudget?: number
  /** Set by stopAll: the service is stopping and starts nothing more. */
  #stopping = false
  readonly #packages: PackageCache
  readonly #pythonPackages: PythonPackageCache
  readonly #settings: SupervisorSettings
  readonly #node: string

  constructor(private readonly options: ProcessDriverOptions) {
    this.#node = options.nodeExecutable ?? process.execPath
    this.#packages = new PackageCache({
      cacheDir: options.cacheDir,
      nodeExecutable: this.#node,
      log: (message) => this.#log(message),
    })
    this.#pythonPackages = new PythonPackageCache({
      cacheDir: options.cacheDir,
      log: (message) => this.#log(message),
    })
    this.#settings = {
      restart: { ...DEFAULT_RESTART, ...options.restart },
      stopGraceMs: options.stopGraceMs ?? 10_000,
      pollIntervalMs: options.pollIntervalMs ?? 1000,
    }
  }

  #log(message: string, detail?: Record<string, unknown>) {
    this.options.log?.(message, detail)
  }

  #emit = (event: RuntimeEvent) => {
    for (const listener of this.#listeners) {
      try {
        listener(event)
      } catch (error) {
        this.#log(`runtime event listener failed: ${(error as Error).message}`)
      }
    }
  }

  /** Runs one operation per agent at a time (a boot-time adopt and a user's start may race). */
  #exclusive<T>(agentId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(agentId) ?? Promise.resolve()
    const next = previous.catch(() => undefined).then(work)
    this.#locks.set(agentId, next)
    void next
      .finally(() => {
        if (this.#locks.get(agentId) === next) this.#locks.delete(agentId)
      })
      .catch(() => undefined)
    return next
  }

  #paths(agentId: string) {
    return agentPaths(this.options.agentsDir, agentId)
  }

  #takenPorts(except: string): Set<number> {
    const ports = new Set<number>()
    for (const [agentId, agent] of this.#agents) {
      if (agentId !== except && agent.port) ports.add(agent.port)
    }
    return ports
  }

  onEvent(listener: RuntimeEventListener): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  create(request: CreateRequest): Promise<ContainerInfo> {
    return this.#exclusive(request.spec.agentId, () => this.#create(request))
  }

  async #create({ spec, plugin, gatewayToken }: CreateRequest): Promise<ContainerInfo> {
    const paths = this.#paths(spec.agentId)
    await ensureAgentFolders(paths)

    let agent = this.#agents.get(spec.agentId)
    let adoptable
    if (!agent?.isLive()) {
      const record = await readRecord(paths.recordFile)
      if (record && isRecordedProcessAlive(record)) adoptable = record
      else if (record) await deleteRecord(paths.recordFile)
      if (!adoptable) {
        // A start that a crash cut between spawn and record: never run the agent twice.
        const strays = await killStrayProcesses(spec.agentId)
        if (strays.length > 0) {
          this.#log(
            `agent ${spec.agentId}: killed stray processes ${strays.join(', ')} of an interrupted start`
          )
        }
      }
    }

    // A live process keeps its port: its rendered config must not move it. A
    // checkpoint listens where it was taken: a wake restores it only there.
    const checkpoint = this.#checkpoint(spec.agentId)
    const checkpointMeta = await checkpoint.meta()
    const port =
      (agent?.isLive() ? agent.port : undefined) ??
      adoptable?.port ??
      (await allocatePort({
        preferred: agent?.port ?? checkpointMeta?.port,
        taken: this.#takenPorts(spec.agentId),
      }))

    const context = {
      agentId: spec.agentId,
      config: spec.config,
      modelProxy: spec.modelProxy,
      driver: 'process' as const,
      port,
      gatewayToken,
      paths: { state: paths.state, workspace: paths.workspace },
    }
    const logFile = agent?.logFile ?? new LogFile(paths.logFile)
    const rendered = [
      ...(await plugin.renderFiles(context)),
      ...renderedSkillFiles(plugin, spec.skills),
    ]
    await writeRenderedFiles(paths, rendered)
    const launch = await plugin.processLaunch(context, paths, {
      nodeExecutable: this.#node,
      ensureNpmPackage: (name, version) => {
        enterPhase(spec.agentId, 'installing')
        return installOr503(`${name}@${version}`, () => this.#packages.ensure(name, version))
      },
      ensurePythonPackages: (name, requirements) => {
        enterPhase(spec.agentId, 'installing')
        return installOr503(name, () => this.#pythonPackages.ensure(name, requirements))
      },
      phase: (step) => enterPhase(spec.agentId, step),
      log: (message) => {
        this.#log(`[agent ${spec.agentId}] ${message}`)
        logFile.note(message)
      },
      compileCache:
        this.options.compileCache === false
          ? undefined
          : { dir: join(this.options.cacheDir, 'compile-cache'), uid: agentRunUid(spec.agentId) },
    })

    const sandboxed = await sandboxLaunch({
      agentId: spec.agentId,
      paths,
      launch,
      readOnly: [this.options.cacheDir, this.#node],
      maxProcesses: spec.resources?.pids ?? plugin.resources.pids,
      seccompFile: await ioUringFilterFile(join(this.options.cacheDir, 'sandbox')),
    })
    if (sandboxed.confinement !== 'bubblewrap')
      warnWeakSandbox(sandboxed.confinement, (message) => this.#log(message))
    const memoryLimitMb = spec.resources?.memoryMb ?? plugin.resources.memoryMb
    const cgroup = await this.#cgroup(spec.agentId, {
      memoryMb: memoryLimitMb,
      cpus: spec.resources?.cpus ?? plugin.resources.cpus,
      pids: spec.resources?.pids ?? plugin.resources.pids,
    })

    if (!agent) {
      agent = new AgentProcess(
        spec.agentId,
        paths,
        this.#settings,
        this.#emit,
        this.options.logMaxBytes ?? 5 * 1024 * 1024
      )
      this.#agents.set(spec.agentId, agent)
    }
    const env = buildChildEnv({
      agentId: spec.agentId,
      paths,
      nodeExecutable: this.#node,
      pluginEnv: launch.env,
    })
    agent.prepared = {
      framework: plugin.name,
      launch: { ...launch, command: sandboxed.command, args: sandboxed.args },
      uid: sandboxed.uid,
      gid: sandboxed.gid,
      env,
      port,
      memoryLimitMb,
      cgroup,
      inheritFiles: sandboxed.inheritFiles,
      checkpoint: this.#checkpointing(sandboxed.rootDir)
        ? {
            store: checkpoint,
            rootDir: sandboxed.rootDir!,
            uid: agentUid(spec.agentId),
            fingerprint: launchFingerprint({
              framework: `${plugin.name}@${plugin.version}`,
              command: sandboxed.command,
              args: sandboxed.args,
              env,
              rendered,
            }),
          }
        : undefined,
    }
    if (adoptable) {
      agent.adopt(adoptable)
      this.#log(`adopted agent ${spec.agentId} process ${adoptable.pid}`)
    }
    return agent.info()
  }

  /** True when a sleep here may checkpoint an agent in this sandbox (said once when not). */
  #checkpointing(rootDir: string | undefined): boolean {
    if (this.options.checkpoints === false) return false
    const { path, reason } = criu()
    if (path && rootDir) return true
    if (!checkpointsSaid) {
      checkpointsSaid = true
      this.#log(
        `agent checkpoints are off: ${reason ?? 'the sandbox is not the root layout (needs root and bubblewrap)'}; a sleeping agent wakes by booting`
      )
    }
    return false
  }

  /** The agent's cgroups with these limits, where this host lets the service make them. */
  async #cgroup(
    agentId: string,
    limits: { memoryMb: number; cpus?: number; pids: number }
  ): Promise<AgentCgroup | undefined> {
    const bases = cgroupBases()
    sayLimits(bases !== undefined, (message) => this.#log(message))
    if (!bases) return undefined
    const cgroup = new AgentCgroup(agentId, bases)
    try {
      await cgroup.apply(limits)
      return cgroup
    } catch (error) {
      // A limit the kernel refuses (below what a running agent uses): the watcher takes over.
      this.#log(`agent ${agentId}: cgroup limits not applied (${(error as Error).message})`)
      return undefined
    }
  }

  #agent(agentId: string): AgentProcess {
    const agent = this.#agents.get(agentId)
    if (!agent) throw new NotFoundException(`Agent ${agentId} has no container`)
    return agent
  }

  start(agentId: string): Promise<ContainerInfo> {
    return this.#exclusive(agentId, async () => {
      if (this.#stopping) throw new ServiceUnavailableException('The service is shutting down')
      const agent = this.#agent(agentId)
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
    const room = agent?.canHibernate() === true && (await this.#diskHolds(agent.privateBytes()))
    if (room) await options.beforeCheckpoint?.()
    await this.#exclusive(agentId, async () => {
      if (!room || !agent?.isLive() || !(await agent.hibernate())) return this.#stop(agentId)
      this.#emit({ type: 'stopped', agentId, at: new Date() })
    })
    if (room) await this.#keepCheckpointsWithinBudget(agentId)
  }

  /**
   * Installs each framework and warms what its agents share, one after the
   * other, as the service (the same caches and locks as an agent's start
   * uses, so a create meanwhile waits for the same install instead of
   * starting a second one). A failure is logged; agents then retry it.
   */
  async prepareFrameworks(plugins: FrameworkPlugin[]): Promise<void> {
    for (const plugin of plugins) {
      if (!plugin.prepareHost) continue
      const started = Date.now()
      try {
        await plugin.prepareHost({
          nodeExecutable: this.#node,
          ensureNpmPackage: (name, version) => this.#packages.ensure(name, version),
          ensurePythonPackages: (name, requirements) =>
            this.#pythonPackages.ensure(name, requirements),
          log: (message) => this.#log(`[${plugin.name}] ${message}`),
          compileCache:
            this.options.compileCache === false
              ? undefined
              : { dir: join(this.options.cacheDir, 'compile-cache'), uid: process.getuid?.() ?? 0 },
        })
        this.#log(
          `${plugin.name} ready on this host in ${Math.round((Date.now() - started) / 1000)} s`
        )
      } catch (error) {
        this.#log(`${plugin.name} could not be prepared: ${(error as Error).message}`)
      }
    }
  }

  resumes(agentId: string): boolean {
    return existsSync(this.#checkpoint(agentId).metaFile)
  }

  /** Where the agent's checkpoint lives (there or not). */
  #checkpoint(agentId: string): AgentCheckpoint {
    return new AgentCheckpoint(join(this.#paths(agentId).runtime, 'checkpoint'))
  }

  /** The agents' checkpoints on disk, oldest first. */
  async #checkpointsOnDisk(): Promise<
    Array<{ agentId: string; store: AgentCheckpoint; bytes: number }>
  > {
    let names: string[] = []
    try {
      names = await readdir(this.options.agentsDir)
    } catch {
      return []
    }
    const found = []
    for (const agentId of names) {
      let store
      try {
        store = this.#checkpoint(agentId)
      } catch {
        continue
      }
      const meta = await store.meta()
      if (meta) found.push({ agentId, store, bytes: meta.bytes, createdAt: meta.createdAt })
    }
    return found.sort((a, b) => a.createdAt.localeCompare(b.createdAt))
  }

  /**
   * True when the disk holds a checkpoint of `bytes` (written uncompressed
   * first) and still keeps a tenth of itself free.
   */
  async #diskHolds(bytes: number): Promise<boolean> {
    const disk = await statfs(this.options.agentsDir)
    const free = disk.bavail * disk.bsize
    // Unset: half of what was free when the first agent slept (docs/runtime.md).
    this.#checkpointBudget ??= this.options.checkpointDiskMb
      ? this.options.checkpointDiskMb * 1024 * 1024
      : free / 2
    return free - bytes >= (disk.blocks * disk.bsize) / 10
  }

  /**
   * After `newest` was checkpointed: while all checkpoints together exceed
   * their budget, the oldest of other agents go first (those agents will
   * wake by booting), and the newest itself when it alone does not fit.
   */
  async #keepCheckpointsWithinBudget(newest: string): Promise<void> {
    const budget = this.#checkpointBudget ?? Number.POSITIVE_INFINITY
    const onDisk = await this.#checkpointsOnDisk()
    let used = onDisk.reduce((sum, entry) => sum + entry.bytes, 0)
    const order = [
      ...onDisk.filter((entry) => entry.agentId !== newest),
      ...onDisk.filter((entry) => entry.agentId === newest),
    ]
    for (const entry of order) {
      if (used <= budget) break
      // One that is being restored or taken right now is left alone.
      if (entry.agentId !== newest && this.#locks.has(entry.agentId)) continue
      await this.#exclusive(entry.agentId, () => entry.store.discard())
      used -= entry.bytes
      this.#log(
        entry.agentId === newest
          ? `agent ${entry.agentId}: its checkpoint does not fit the checkpoint budget; it will wake by booting`
          : `agent ${entry.agentId}: its checkpoint made room for a newer one; it will wake by booting`
      )
    }
  }

  stop(agentId: string): Promise<void> {
    return this.#exclusive(agentId, () => this.#stop(agentId))
  }

  async #stop(agentId: string): Promise<void> {
    const agent = this.#agents.get(agentId)
    if (agent) {
      const wasLive = agent.isLive()
      await agent.stop()
      if (wasLive) this.#emit({ type: 'stopped', agentId, at: new Date() })
      return
    }
    // Not supervised by this run of the service: stop what the record names.
    const paths = this.#paths(agentId)
    const record = await readRecord(paths.recordFile)
    if (record) {
      await killRecordedProcess(record, this.#settings.stopGraceMs)
      await deleteRecord(paths.recordFile)
    }
    const bases = cgroupBases()
    if (bases) await new AgentCgroup(agentId, bases).release()
  }

  async remove(agentId: string): Promise<void> {
    await this.stop(agentId)
    await this.#exclusive(agentId, async () => {
      this.#agents.get(agentId)?.detach()
      this.#agents.delete(agentId)
      await rm(this.#paths(agentId).root, { recursive: true, force: true })
    })
  }

  async inspect(agentId: string): Promise<ContainerInfo> {
    const agent = this.#agents.get(agentId)
    if (agent) return agent.info()
    const paths = this.#paths(agentId)
    const record = await readRecord(paths.recordFile)
    const alive = record !== undefined && isRecordedProcessAlive(record)
    return {
      agentId,
      driver: 'process',
      // A live process not yet adopted by this run of the service (create() adopts it).
      state: alive ? 'running' : existsSync(paths.root) ? 'stopped' : 'absent',
      containerId: alive ? record.containerId : null,
      framework: record?.framework ?? null,
      baseUrl: alive ? `http://127.0.0.1:${record.port}` : null,
      startedAt: alive ? new Date(record.startedAt) : null,
      restartCount: alive ? record.restartCount : 0,
      lastError: null,
    }
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
    return new LocalWorkspaceFiles(this.#paths(agentId).workspace, {
      outsidePrefixes: [this.options.agentsDir, this.options.cacheDir, ...hostRootFolders()],
    })
  }

  reader(agentId: string): AgentFileReader {
    const paths = this.#paths(agentId)
    return new LocalAgentReader({ state: paths.state, workspace: paths.workspace })
  }

  syncSkills(agentId: string, plugin: FrameworkPlugin, change: SkillChange): Promise<void> {
    return this.#exclusive(agentId, async () => {
      const paths = this.#paths(agentId)
      await writeRenderedFiles(paths, renderedSkillFiles(plugin, change.write))
      const base = plugin.skillsDir?.root === 'state' ? paths.state : paths.workspace
      for (const skillId of change.remove) {
        await rm(join(base, skillFolder(plugin, skillId)), { recursive: true, force: true })
      }
    })
  }

  async sweep(keepAgentIds: string[]): Promise<string[]> {
    const keep = new Set(keepAgentIds)
    let names: string[] = []
    try {
      names = await readdir(this.options.agentsDir)
    } catch {
      return []
    }
    const stopped: string[] = []
    for (const agentId of names) {
      if (keep.has(agentId)) continue
      let paths
      try {
        paths = this.#paths(agentId)
      } catch {
        continue
      }
      const record = await readRecord(paths.recordFile)
      if (this.#agents.get(agentId)?.isLive() || (record && isRecordedProcessAlive(record))) {
        await this.stop(agentId)
        stopped.push(agentId)
      }
      this.#agents.get(agentId)?.detach()
      this.#agents.delete(agentId)
      // Groups of an agent that crashed for good or never started.
      const bases = cgroupBases()
      if (bases) await new AgentCgroup(agentId, bases).release()
    }
    // A delete cut short after its folder went, or a start cut before its
    // record was written, leaves a process no folder or record names.
    for (const agentId of markedAgentIdsUnder(this.options.agentsDir)) {
      if (keep.has(agentId) || this.#agents.get(agentId)?.isLive()) continue
      const strays = await killStrayProcesses(agentId)
      if (strays.length === 0) continue
      this.#log(`agent ${agentId}: killed processes ${strays.join(', ')} of an agent that is gone`)
      if (!stopped.includes(agentId)) stopped.push(agentId)
    }
    return stopped
  }

  async close(): Promise<void> {
    for (const agent of this.#agents.values()) agent.detach()
    this.#agents.clear()
  }

  /** Service shutdown: every agent process stops (SIGTERM, SIGKILL after the grace period). */
  /**
   * Service shutdown: starts nothing more, lets operations under way finish
   * (a start racing the shutdown would otherwise leave a process behind
   * that keeps the stopped service alive), then stops every agent.
   */
  async stopAll(): Promise<void> {
    this.#stopping = true
    await Promise.allSettled([...this.#locks.values()])
    await Promise.allSettled([...this.#agents.keys()].map((agentId) => this.stop(agentId)))
  }
}
