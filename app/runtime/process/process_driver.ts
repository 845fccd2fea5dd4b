import { enterPhase } from '#runtime/boot_phases'
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { existsSync, readdirSync } from 'node:fs'
import { readdir, rm, statfs } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  AgentNotRunningException,
  NotFoundException,
  ServiceUnavailableException,
} from '#core/exceptions/api_exceptions'
import type { AgentFileReader, FrameworkPlugin, RenderedFile } from '#plugins/types'
import {
  SERVICE_FOLDER,
  agentPaths,
  ensureAgentFolders,
  removeAgentFolders,
  type AgentPaths,
} from '#runtime/agent_paths'
import { removeBelow, writeFileBelow, type Owner } from '#runtime/files/confined_dir'
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
import {
  FIXED_FOLDERS,
  agentRunUid,
  agentUid,
  fixedLayoutAvailable,
  sandboxLaunch,
  type SandboxMode,
  type SandboxedLaunch,
} from '#runtime/process/sandbox'
import { AgentCheckpoint, criu } from '#runtime/process/checkpoint'
import {
  TemplateStore,
  carryFolders,
  emptyTemplateCounts,
  templateFingerprint,
  templateKey,
  type TemplateCounts,
  type TemplateFallback,
} from '#runtime/process/template'
import { ioUringFilterFile } from '#runtime/process/seccomp'
import { AgentCgroup, cgroupBases } from '#runtime/process/cgroups'
import { AGENT_MARKER_VARIABLE, buildChildEnv } from '#runtime/process/child_env'
import { LogFile } from '#runtime/process/log_file'
import { allocatePort } from '#runtime/process/ports'
import { AgentNetworking } from '#runtime/process/agent_network/agent_networking'
import type { AgentNetworkSettings } from '#runtime/process/agent_network/agent_networks'
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
  /**
   * New agents of a framework that allows it start from a template
   * checkpoint instead of a cold boot (app/runtime/process/template.ts;
   * AGENT_TEMPLATES=on turns it on in the service; default off).
   * Needs checkpoints, the root layout and agent network namespaces.
   */
  templates?: boolean
  /** AGENT_SANDBOX: the agents' sandbox (app/runtime/process/sandbox.ts); default auto. */
  sandbox?: SandboxMode
  /**
   * Each agent in a network namespace of its own (app/runtime/process/agent_network):
   * default from AGENT_NETWORK, AGENT_NETWORK_CIDR and AGENT_NETWORK_ALLOW; null keeps
   * the host's network.
   */
  network?: AgentNetworkSettings | null
  /** The service's log. */
  log?: (message: string, detail?: Record<string, unknown>) => void
  /** The service's log at warning level (default: log). */
  warn?: (message: string) => void
}

const DEFAULT_RESTART: RestartPolicy = {
  baseDelayMs: 1000,
  maxDelayMs: 30_000,
  maxConsecutiveRestarts: 5,
  stableAfterMs: 60_000,
}

/** How long a template's framework may take to answer its readiness path. */
const TEMPLATE_BOOT_TIMEOUT_MS = 180_000
/** How long a restored template may take to answer to the agent's own token. */
const TEMPLATE_PERSONALISE_TIMEOUT_MS = 10_000

/** The fixed layout's environment paths (HOME, TMPDIR, XDG_*), the same for every agent. */
function fixedEnvPaths(paths: AgentPaths): AgentPaths {
  const home = FIXED_FOLDERS.home
  return {
    ...paths,
    ...FIXED_FOLDERS,
    xdgConfig: join(home, '.config'),
    xdgData: join(home, '.local', 'share'),
    xdgState: join(home, '.local', 'state'),
  }
}

/** A random string as long as `value`, of letters and digits (a stand-in for a token). */
function randomLike(value: string): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
  return [...randomBytes(value.length)].map((byte) => alphabet[byte % alphabet.length]).join('')
}

/** Until GET `url` answers 2xx (true) or the time is up (false; tried at least once). */
async function answers(url: string, headers: Record<string, string>, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      const response = await fetch(url, { headers, signal: AbortSignal.timeout(2000) })
      await response.body?.cancel()
      if (response.ok) return true
    } catch {
      // Not listening yet.
    }
    if (Date.now() >= deadline) return false
    await sleep(100)
  }
}

/** How long a shutdown waits for operations under way (checkpoint, restore) before stopping agents. */
const OPERATIONS_WAIT_MS = 5_000

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

/**
 * The plugin's rendered files and skills, written into the agent's own
 * folders without following a link it put there (a link named SOUL.md is
 * replaced, never written through), owned by the agent's uid.
 */
async function writeRenderedFiles(paths: AgentPaths, files: RenderedFile[], owner?: Owner) {
  for (const file of files) {
    const checked = resolveWorkspacePath(file.path)
    if (!checked.relative) throw new Error(`Rendered file with an empty path (${file.root})`)
    const target = join(file.root === 'state' ? paths.state : paths.workspace, checked.relative)
    await writeFileBelow(paths.agentsDir, target, file.content, {
      mode: file.mode ?? 0o644,
      owner,
      onlyIfMissing: file.onlyIfMissing,
    })
  }
}

/** The agent's uid and gid, when it runs under one of its own (root). */
function agentOwner(agentId: string): Owner | undefined {
  return process.getuid?.() === 0 ? { uid: agentUid(agentId), gid: agentUid(agentId) } : undefined
}

/**
 * The `process` driver: each agent's framework is a supervised child
 * process of the service host, with its own folder, port and environment.
 * Processes survive a restart of the service and are adopted by the next
 * one (see ProcessRecord). The container id is `proc-<random>`, new on
 * every start.
 */

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

/**
 * Said once per driver and kind (`said`): which sandbox agents get, loudly
 * when none (AGENT_SANDBOX=none), and what it changed on the host.
 */
function saySandbox(
  sandboxed: SandboxedLaunch,
  said: Set<string>,
  log: (message: string) => void,
  warn: (message: string) => void
) {
  if (sandboxed.note) warn(sandboxed.note)
  if (said.has(sandboxed.confinement)) return
  said.add(sandboxed.confinement)
  switch (sandboxed.confinement) {
    case 'uid':
      return warn(
        'AGENT_SANDBOX=none: agents run WITHOUT a sandbox, under their own user ids, and see the host file system, its processes and io_uring'
      )
    case 'none':
      return warn(
        'AGENT_SANDBOX=none: agents run WITHOUT a sandbox, as the service user, and can read everything the service can'
      )
    case 'unshare':
      return log(
        'agents run in the unshare sandbox (mount, pid, IPC and UTS namespaces, own uid, no capabilities, io_uring refused); checkpoints are off in it'
      )
  }
}

export class ProcessDriver implements ContainerDriver {
  readonly name = 'process' as const
  readonly #agents = new Map<string, AgentProcess>()
  readonly #listeners = new Set<RuntimeEventListener>()
  readonly #locks = new Map<string, Promise<unknown>>()
  /** Bytes all agents' checkpoints may take together (set at the first sleep). */
  #checkpointBudget?: number
  /** The sandbox kinds the log has named (saySandbox). */
  readonly #sandboxSaid = new Set<string>()
  /** Set by stopAll: the service is stopping and starts nothing more. */
  #stopping = false
  readonly #packages: PackageCache
  readonly #pythonPackages: PythonPackageCache
  readonly #settings: SupervisorSettings
  readonly #node: string
  readonly #network: AgentNetworking
  readonly #templates: TemplateStore
  /** Template starts and counted cold boots of new agents (templateCounts()). */
  readonly #templateCounts: TemplateCounts = emptyTemplateCounts()
  /** Templates being built, by key. */
  readonly #templateBuilds = new Map<string, Promise<void>>()
  /** The ids the builds run their framework under: their events are nobody's. */
  readonly #templateAgents = new Set<string>()
  /** The fingerprint of each template run's launch. */
  readonly #buildFingerprints = new Map<string, string>()

  constructor(private readonly options: ProcessDriverOptions) {
    this.#node = options.nodeExecutable ?? process.execPath
    this.#network = new AgentNetworking(options.network, (message) => this.#log(message))
    this.#templates = new TemplateStore(join(options.agentsDir, SERVICE_FOLDER, '.templates'))
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
      launchesRefused: () => this.#stopping,
    }
  }

  #log(message: string, detail?: Record<string, unknown>) {
    this.options.log?.(message, detail)
  }

  #emit = (event: RuntimeEvent) => {
    if (this.#templateAgents.has(event.agentId)) return
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

  /**
   * `template`: the run a template is taken of (#buildTemplate), not an
   * agent's: it never starts from a template itself.
   */
  async #create(
    { spec, plugin, gatewayToken, containerId }: CreateRequest,
    template?: { key: string }
  ): Promise<ContainerInfo> {
    const paths = this.#paths(spec.agentId)
    // A new agent: never started by this run of the service, nor by a previous one (no output).
    const known = this.#agents.get(spec.agentId)
    const fresh = known ? known.neverStarted : !existsSync(paths.logFile)
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
    // The fixed layout: the same folders and port for every agent (its own network namespace).
    const fixed = this.#fixedLayout(plugin)
    const shape = fixed ? plugin.template?.shape(spec.config) : undefined
    const port =
      (fixed ? plugin.defaultPort : undefined) ??
      (agent?.isLive() ? agent.port : undefined) ??
      adoptable?.port ??
      (await allocatePort({
        preferred: agent?.port ?? checkpointMeta?.port,
        taken: this.#takenPorts(spec.agentId),
      }))

    const network = await this.#network.prepare(spec.agentId, spec.modelProxy)
    const context = {
      agentId: spec.agentId,
      config: spec.config,
      modelProxy: network.modelProxy,
      driver: 'process' as const,
      port,
      gatewayToken,
      paths: fixed
        ? { state: FIXED_FOLDERS.state, workspace: FIXED_FOLDERS.workspace }
        : { state: paths.state, workspace: paths.workspace },
    }
    const logFile = agent?.logFile ?? new LogFile(paths.logFile)
    const rendered = [
      ...(await plugin.renderFiles(context)),
      ...renderedSkillFiles(plugin, spec.skills),
    ]
    await writeRenderedFiles(paths, rendered, agentOwner(spec.agentId))
    const launch = await plugin.processLaunch(context, fixed ? FIXED_FOLDERS : paths, {
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
      ...(fixed ? { hostFolders: paths } : {}),
      log: (message) => {
        this.#log(`[agent ${spec.agentId}] ${message}`)
        logFile.note(message)
      },
      compileCache:
        this.options.compileCache === false
          ? undefined
          : { dir: join(this.options.cacheDir, 'compile-cache'), uid: agentRunUid(spec.agentId) },
    })

    let sandboxed
    try {
      sandboxed = await sandboxLaunch({
        mode: this.options.sandbox,
        agentId: spec.agentId,
        paths,
        launch,
        readOnly: [this.options.cacheDir, this.#node],
        maxProcesses: spec.resources?.pids ?? plugin.resources.pids,
        seccompFile: await ioUringFilterFile(join(this.options.cacheDir, 'sandbox')),
        fixedLayout: fixed,
      })
    } catch (error) {
      // No sandbox for it here: its owner reads why in its log (and its status is error).
      logFile.note((error as Error).message)
      throw error
    }
    saySandbox(
      sandboxed,
      this.#sandboxSaid,
      (message) => this.#log(message),
      (message) => (this.options.warn ?? ((text: string) => this.#log(text)))(message)
    )
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
      paths: fixed ? fixedEnvPaths(paths) : paths,
      nodeExecutable: this.#node,
      pluginEnv: launch.env,
      ...(fixed ? { agentsDir: this.options.agentsDir } : {}),
    })
    // What a template of this launch holds: the same for every agent of this framework and shape.
    const fingerprint = shape
      ? templateFingerprint({
          framework: `${plugin.name}@${plugin.version}`,
          shape,
          command: launch.command,
          args: launch.args,
          // Without the marker, and the agent's own tokens as placeholders (a copy gets its own).
          env: Object.fromEntries(
            Object.entries(env)
              .filter(([name]) => name !== AGENT_MARKER_VARIABLE)
              .map(([name, value]) => [
                name,
                value
                  .replaceAll(gatewayToken, '<gateway token>')
                  .replaceAll(spec.modelProxy.token, '<model proxy token>'),
              ])
          ),
          node: this.#node,
        })
      : undefined
    // Whatever the sandbox, the launch runs in the agent's network namespace.
    const entered = network.enter(sandboxed)
    agent.prepared = {
      framework: plugin.name,
      launch: { ...launch, command: entered.command, args: entered.args },
      uid: entered.uid,
      gid: entered.gid,
      env,
      port,
      gatewayHost: network.address,
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
            enter: network.enter,
            mounts: sandboxed.mounts,
          }
        : undefined,
    }
    if (template) {
      this.#templateAgents.add(spec.agentId)
      if (fingerprint) this.#buildFingerprints.set(spec.agentId, fingerprint)
    } else if (fresh && shape && fingerprint && agent.prepared.checkpoint && !adoptable) {
      agent.prepared.template = this.#templateStart(spec, plugin, agent, {
        key: templateKey(plugin.name, shape),
        shape,
        fingerprint,
        gatewayToken,
      })
    }
    // A live run keeps its id; the next one takes the id scheduled for it.
    agent.nextContainerId = agent.isLive() || adoptable ? undefined : containerId
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
        `agent checkpoints are off: ${reason ?? "the sandbox is not bubblewrap's root layout (needs root and bubblewrap)"}; a sleeping agent wakes by booting`
      )
    }
    return false
  }

  /**
   * True when this framework's agents run in the fixed layout here, so that
   * they can start from a template: it allows templates, templates are on,
   * and the host has checkpoints, the root layout and network namespaces
   * (the same port in every agent's own).
   */
  #fixedLayout(plugin: FrameworkPlugin): boolean {
    return (
      plugin.template !== undefined &&
      this.options.templates === true &&
      this.options.checkpoints !== false &&
      criu().path !== undefined &&
      this.#network.networks !== undefined &&
      fixedLayoutAvailable()
    )
  }

  /** Template starts and counted cold boots of new agents since this driver began. */
  templateCounts(): TemplateCounts {
    return structuredClone(this.#templateCounts)
  }

  /**
   * Builds (or rebuilds) the template new agents like `spec` start from,
   * now, and waits for it: ahead of the first such agent, while the host is
   * idle. False when this framework and config never use one here.
   */
  async prepareTemplate(spec: CreateRequest['spec'], plugin: FrameworkPlugin): Promise<boolean> {
    const shape = this.#fixedLayout(plugin) ? plugin.template?.shape(spec.config) : undefined
    if (!shape) return false
    this.#buildTemplateSoon(templateKey(plugin.name, shape), spec, plugin, shape)
    await this.whenTemplatesBuilt()
    return (await this.#templates.meta(templateKey(plugin.name, shape))) !== undefined
  }

  /** Until the templates being built now are built (or failed). */
  async whenTemplatesBuilt(): Promise<void> {
    await Promise.allSettled([...this.#templateBuilds.values()])
  }

  /**
   * How a new agent's first start uses its template: the agent's own copy of
   * the images (or why not, which builds the template meanwhile), and its
   * own token taken after the restore.
   */
  #templateStart(
    spec: CreateRequest['spec'],
    plugin: FrameworkPlugin,
    agent: AgentProcess,
    template: {
      key: string
      shape: Record<string, unknown>
      fingerprint: string
      gatewayToken: string
    }
  ): NonNullable<AgentProcess['prepared']>['template'] {
    const settings = plugin.template!
    const paths = this.#paths(spec.agentId)
    const { headers } = plugin.chatEndpoint({
      agentId: spec.agentId,
      gatewayToken: template.gatewayToken,
    })
    let templateToken: string | undefined
    return {
      copy: async () => {
        const meta = await this.#templates.meta(template.key)
        if (!meta || meta.fingerprint !== template.fingerprint) {
          if (meta) await this.#templates.discard(template.key)
          this.#buildTemplateSoon(template.key, spec, plugin, template.shape)
          return {
            fallback: meta ? 'stale' : 'missing',
            reason: meta
              ? `the template of ${plugin.name} is of another launch (${meta.framework}); a new one is built`
              : `no template of ${plugin.name} for this config yet; one is built`,
          }
        }
        const dir = join(paths.runtime, 'template-copy')
        try {
          const uid = agentUid(spec.agentId)
          await this.#templates.personalisedCopy(template.key, dir, {
            agentId: spec.agentId,
            uid,
            gid: uid,
            secrets: [
              [meta.gatewayToken, template.gatewayToken],
              [meta.modelProxyToken, spec.modelProxy.token],
            ],
          })
          templateToken = meta.gatewayToken
          await carryFolders(
            this.#templates,
            template.key,
            this.options.agentsDir,
            paths,
            agentOwner(spec.agentId)
          )
          return { dir }
        } catch (error) {
          await rm(dir, { recursive: true, force: true })
          return { fallback: 'identity', reason: (error as Error).message }
        }
      },
      personalise: async (pid) => {
        if (settings.reloadSignal) {
          try {
            process.kill(pid, settings.reloadSignal)
          } catch (error) {
            return `could not signal it: ${(error as Error).message}`
          }
        }
        const url = `http://${agent.host}:${agent.port}${settings.tokenCheckPath}`
        const own = await answers(url, headers, TEMPLATE_PERSONALISE_TIMEOUT_MS)
        if (!own) {
          return `it did not answer to its own token within ${TEMPLATE_PERSONALISE_TIMEOUT_MS / 1000} s`
        }
        // The template's token must be refused: no copy of it may have been left in force.
        const { headers: templateHeaders } = plugin.chatEndpoint({
          agentId: spec.agentId,
          gatewayToken: templateToken ?? '',
        })
        if (await answers(url, templateHeaders, 0))
          return "it still answers to the template's token"
        return undefined
      },
      report: (outcome: 'restored' | TemplateFallback, reason?: string) => {
        if (outcome === 'restored') this.#templateCounts.restored++
        else this.#templateCounts.coldBoots[outcome]++
        this.#log(
          outcome === 'restored'
            ? `agent ${spec.agentId}: started from the ${plugin.name} template`
            : `agent ${spec.agentId}: cold boot instead of a template start (${outcome}: ${reason})`,
          { template: outcome }
        )
      },
    }
  }

  /** Builds the template `key` in the background, once at a time per key. */
  #buildTemplateSoon(
    key: string,
    spec: CreateRequest['spec'],
    plugin: FrameworkPlugin,
    shape: Record<string, unknown>
  ) {
    if (this.#templateBuilds.has(key) || this.#stopping) return
    const build = this.#buildTemplate(key, spec, plugin, shape)
      .catch((error) =>
        this.#log(`${plugin.name} template could not be built: ${(error as Error).message}`)
      )
      .finally(() => this.#templateBuilds.delete(key))
    this.#templateBuilds.set(key, build)
  }

  /**
   * Boots the framework once from the shape alone (no secret, no
   * personality: a model proxy token and a gateway token of its own, both
   * worthless), under an id and uid of its own, in the fixed layout; once it
   * answers its readiness path, dumps it (uncompressed: it is copied for
   * every agent) and keeps the images as the template `key`. The run's
   * folders, namespace and groups go with it.
   */
  async #buildTemplate(
    key: string,
    agentSpec: CreateRequest['spec'],
    plugin: FrameworkPlugin,
    shape: Record<string, unknown>
  ): Promise<void> {
    const templateId = randomUUID()
    const started = Date.now()
    // Its tokens: random, as long as an agent's, so that a copy's can be replaced in place.
    const gatewayToken = randomBytes(24).toString('hex')
    const modelProxyToken = randomLike(agentSpec.modelProxy.token)
    const spec = {
      agentId: templateId,
      framework: plugin.name,
      config: shape,
      modelProxy: { ...agentSpec.modelProxy, token: modelProxyToken },
    }
    try {
      await this.#exclusive(templateId, () =>
        this.#create({ spec, plugin, gatewayToken } as CreateRequest, { key })
      )
      const agent = this.#agent(templateId)
      await this.start(templateId)
      const ready = await answers(
        `http://${agent.host}:${agent.port}${plugin.readinessPath}`,
        {},
        TEMPLATE_BOOT_TIMEOUT_MS
      )
      if (!ready) throw new Error('it did not get ready')
      const prepared = agent.prepared!
      // shape(shape) is the shape: the template's launch is what its agents' is.
      const fingerprint = this.#buildFingerprints.get(templateId)
      if (!fingerprint) throw new Error(`${plugin.name}'s template shape does not describe itself`)
      const taken = await this.#exclusive(templateId, () => agent.hibernate({ uncompressed: true }))
      if (!taken) throw new Error('it could not be checkpointed (its log says why)')
      const uid = agentUid(templateId)
      const meta = await this.#checkpoint(templateId).meta()
      const runPaths = this.#paths(templateId)
      await this.#templates.install(
        key,
        runPaths.checkpoint,
        {
          key,
          fingerprint,
          framework: `${plugin.name}@${plugin.version}`,
          uid,
          gid: uid,
          marker: templateId,
          gatewayToken,
          modelProxyToken,
          port: prepared.port,
          bytes: meta?.bytes ?? 0,
          createdAt: new Date().toISOString(),
        },
        runPaths
      )
      this.#log(
        `${plugin.name} template built in ${Math.round((Date.now() - started) / 100) / 10} s (${Math.round((meta?.bytes ?? 0) / 1024 / 1024)} MB)`
      )
    } finally {
      await this.remove(templateId).catch(() => undefined)
      await this.#network.teardown(templateId).catch(() => undefined)
      this.#templateAgents.delete(templateId)
      this.#buildFingerprints.delete(templateId)
    }
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
    const room = agent?.canHibernate() === true && (await this.#diskHolds(agent.privateBytes()))
    if (room) await options.beforeCheckpoint?.()
    await this.#exclusive(agentId, async () => {
      if (!room || !agent?.isLive() || !(await agent.hibernate())) return this.#stop(agentId)
      await this.#network.teardown(agentId)
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
    // All at once: one framework's long install (Hermes from PyPI) must not
    // hold back another's (an OpenClaw agent created meanwhile would wait).
    await Promise.all(plugins.map((plugin) => this.#prepareFramework(plugin)))
  }

  async #prepareFramework(plugin: FrameworkPlugin): Promise<void> {
    if (!plugin.prepareHost) return
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

  resumes(agentId: string): boolean {
    return existsSync(this.#checkpoint(agentId).metaFile)
  }

  /** Where the agent's checkpoint lives (there or not). */
  #checkpoint(agentId: string): AgentCheckpoint {
    return new AgentCheckpoint(this.#paths(agentId).checkpoint)
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
      await this.#network.teardown(agentId)
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
    await this.#network.teardown(agentId)
    const bases = cgroupBases()
    if (bases) await new AgentCgroup(agentId, bases).release()
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
      baseUrl: alive ? `http://${record.host ?? '127.0.0.1'}:${record.port}` : null,
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
      trustedBase: this.options.agentsDir,
      owner: agentOwner(agentId),
    })
  }

  reader(agentId: string): AgentFileReader {
    const paths = this.#paths(agentId)
    return new LocalAgentReader(
      { state: paths.state, workspace: paths.workspace },
      this.options.agentsDir
    )
  }

  syncSkills(agentId: string, plugin: FrameworkPlugin, change: SkillChange): Promise<void> {
    return this.#exclusive(agentId, async () => {
      const paths = this.#paths(agentId)
      await writeRenderedFiles(paths, renderedSkillFiles(plugin, change.write), agentOwner(agentId))
      const base = plugin.skillsDir?.root === 'state' ? paths.state : paths.workspace
      for (const skillId of change.remove) {
        await removeBelow(paths.agentsDir, join(base, skillFolder(plugin, skillId)))
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
    // Namespaces nothing runs in (agents gone, or left by a crash of the service).
    await this.#network.sweep(
      (agentId) => keep.has(agentId) && this.#agents.get(agentId)?.isLive() === true
    )
    return stopped
  }

  async close(): Promise<void> {
    for (const agent of this.#agents.values()) agent.detach()
    this.#agents.clear()
    await this.#network.close()
  }

  /**
   * Service shutdown, bounded (about 17 s with the default grace): launches
   * nothing more (a boot, wake or crash restart under way launches no
   * process now), gives operations under way (a checkpoint, a restore) a
   * few seconds to end, stops every agent (SIGTERM, SIGKILL after the
   * grace), then kills whatever still carries an agent marker under this
   * service's agents folder (a run an unfinished operation launched, a
   * restored tree), so no agent outlives the service.
   */
  async stopAll(): Promise<void> {
    this.#stopping = true
    await Promise.race([Promise.allSettled([...this.#locks.values()]), sleep(OPERATIONS_WAIT_MS)])
    await Promise.race([
      Promise.allSettled([...this.#agents.keys()].map((agentId) => this.stop(agentId))),
      sleep(this.#settings.stopGraceMs + 2_000),
    ])
    for (let round = 0; round < 3; round++) {
      const left = [...markedAgentIdsUnder(this.options.agentsDir)]
      if (left.length === 0) break
      this.#log(`killing processes of agents still running at shutdown: ${left.join(', ')}`)
      await Promise.allSettled(left.map((agentId) => killStrayProcesses(agentId)))
    }
  }
}
