/**
 * The runtime layer: where agents' frameworks run. The agents layer talks to
 * `RuntimeService` (app/runtime/runtime_service.ts); the service talks to one
 * `ContainerDriver`, chosen by AGENT_RUNTIME (`process`, the default, or
 * `docker`). Every type the agents and chat areas need is in this file.
 */
import type { TokenUsage } from '#core/openai/wire'
import type {
  AgentFileReader,
  AgentResources,
  AgentSkillFile,
  ChatTurn,
  FrameworkPlugin,
} from '#plugins/types'

export type { AgentFileReader, AgentResources, AgentSkillFile, ChatTurn } from '#plugins/types'

export type DriverName = 'process' | 'docker' | 'swarm'

/** What the agents layer hands the runtime to start or reconfigure an agent. */
export interface AgentRuntimeSpec {
  agentId: string
  /**
   * The owning account's id: the boot queue lets accounts take turns.
   * Absent (tests, tools), the agent counts as its own account.
   */
  ownerId?: string
  /** Name of an installed framework plugin (`openclaw`, `hermes`, ...). */
  framework: string
  /** The agent's decrypted config, validated by the plugin. Never logged. */
  config: Record<string, unknown>
  /** The service's model proxy as this agent reaches it, with the agent's proxy token. */
  modelProxy: { baseUrl: string; token: string; model: string }
  /** Limits from the agent's plan; the plugin's defaults fill the rest. */
  resources?: Partial<AgentResources>
  /** Catalogue skills installed on the agent, rendered at every start. */
  skills?: AgentSkillFile[]
}

/** What a new agent of the plugin's framework with the default config starts with. */
export type NewAgentSpec = (plugin: FrameworkPlugin) => AgentRuntimeSpec

/**
 * Where a container stands.
 * - `starting`: launched, restarting after a crash is `restarting`;
 * - `running`: the process/container is alive (not necessarily ready: see waitUntilReady);
 * - `stopped`: stopped on purpose (or never started since the service booted);
 * - `error`: crashed repeatedly and was given up on;
 * - `absent`: nothing is known about this agent (never created, or removed).
 */
export type ContainerState = 'starting' | 'running' | 'restarting' | 'stopped' | 'error' | 'absent'

/** What a driver knows about one agent's container. */
export interface ContainerInfo {
  agentId: string
  driver: DriverName
  state: ContainerState
  /** New on every start: a restart gives a new id. Null before the first start. */
  containerId: string | null
  framework: string | null
  /** Loopback base URL of the framework's HTTP server, e.g. `http://127.0.0.1:41234`. */
  baseUrl: string | null
  /** When the current process/container started. */
  startedAt: Date | null
  /** Automatic restarts after crashes since the last explicit start. */
  restartCount: number
  /** Why the last run ended, when it ended by itself. */
  lastError: string | null
}

/** Resource figures of a running container. */
export interface ContainerUsage {
  /** Percent of one CPU core over the last sampling window (may exceed 100 on several cores). */
  cpuPercent: number
  /** Resident memory of the agent's processes, MiB. */
  memoryMb: number
  memoryLimitMb: number
}

/** One entry of a workspace directory listing (spec: "Container file entry"). */
export interface FileEntry {
  name: string
  type: 'file' | 'directory'
  /** Bytes; 0 for directories. */
  size: number
}

/**
 * The agent's workspace as the file manager sees it. Every path goes through
 * `resolveWorkspacePath` (app/runtime/files/workspace_path.ts): `..`,
 * absolute paths outside the workspace, symlinks pointing out, NUL bytes
 * and percent-encoded separators or dots throw ForbiddenException (403).
 * `/` (or an empty path) is the workspace root.
 */
export interface WorkspaceFiles {
  /** Throws NotFoundException when the directory does not exist. */
  list(path: string): Promise<FileEntry[]>
  /** UTF-8 content; NotFoundException when missing, ValidationException for a directory. */
  read(path: string): Promise<{ content: string; size: number }>
  /** Creates parent directories; `path` in the answer is the normalised workspace path (`/a/b.txt`). */
  write(path: string, content: string): Promise<{ path: string; size: number }>
  /** Files or whole directories; NotFoundException when missing; the root cannot be deleted. */
  delete(path: string): Promise<{ deleted: string }>
}

/** Events drivers emit; the agents layer turns them into feed events and agent status. */
export type RuntimeEvent =
  | {
      type: 'started'
      agentId: string
      containerId: string
      at: Date
      /** Restored from a checkpoint (the run goes on) rather than booted. */
      restored?: boolean
      /** A new agent started from its framework's template checkpoint rather than booted. */
      fromTemplate?: boolean
    }
  | { type: 'ready'; agentId: string; containerId: string | null; at: Date }
  | {
      type: 'exited'
      agentId: string
      /** Why it ended, e.g. "exited with code 1" or "killed by SIGKILL". */
      reason: string
      at: Date
    }
  | {
      type: 'restarting'
      agentId: string
      restartCount: number
      delayMs: number
      at: Date
    }
  | {
      /** Crashed too often in a row: the driver gave up. The agent's status should become `error`. */
      type: 'error'
      agentId: string
      message: string
      restartCount: number
      at: Date
    }
  | { type: 'stopped'; agentId: string; at: Date }
  /** Stopped for being idle (or to make room): its stored status stays `active`. */
  | { type: 'sleeping'; agentId: string; at: Date }

export type RuntimeEventListener = (event: RuntimeEvent) => void

/** Skills to write (`<skillsDir>/<id>/SKILL.md`) and skill ids whose folders to remove. */
export interface SkillChange {
  write: AgentSkillFile[]
  remove: string[]
}

/** What a driver needs to create (or adopt) one agent's container. */
export interface CreateRequest {
  spec: AgentRuntimeSpec
  plugin: FrameworkPlugin
  /** Per-agent secret the service uses to call the framework (kept by the runtime). */
  gatewayToken: string
  /**
   * The id its next run takes, chosen when the run was scheduled (the API
   * answers it before the container exists). Drivers name the run so, or
   * label it so where the engine names containers itself. An adopted live
   * container keeps its own id.
   */
  containerId?: string
}

/**
 * One container driver. All methods take the agent id; unknown agents are
 * `absent` in inspect() and make the other methods throw NotFoundException.
 */
export interface ContainerDriver {
  readonly name: DriverName

  /**
   * Prepares the agent's container: folders or volume, rendered files,
   * launch. When a live container of this agent already exists (for example
   * after the service restarted) it is adopted and keeps running.
   */
  create(request: CreateRequest): Promise<ContainerInfo>

  /** Starts a created container; a no-op when it is already running. */
  start(agentId: string): Promise<ContainerInfo>

  /** Stops it: SIGTERM, then SIGKILL after the grace period. Keeps its data. */
  stop(agentId: string): Promise<void>

  /**
   * Sleep (scale to zero): like stop, but where the driver can it keeps the
   * running processes on disk so that the next start resumes them instead
   * of booting the framework (the process driver, with CRIU).
   */
  hibernate?(agentId: string, options?: HibernateOptions): Promise<void>

  /**
   * A short quiesce (a backup's copy): `work` runs with the agent's running
   * processes frozen, which go on where they stood after it. Undefined,
   * `work` not run, when this run cannot be frozen (not running, no freezer
   * on this host): the caller then puts the agent to sleep instead.
   */
  whileFrozen?<T>(agentId: string, work: () => Promise<T>): Promise<{ value: T } | undefined>

  /**
   * Where the agent's folders lie on this host, for a backup's copy and a
   * restore (app/backups), or why a backup cannot reach them.
   */
  hostFolders?(agentId: string): Promise<HostFolders | FoldersUnavailable>

  /** True when its next start would resume a checkpoint instead of booting (the boot queue lets it go first). */
  resumes?(agentId: string): boolean

  /**
   * Installs and warms these frameworks on this host ahead of any agent
   * (service start, in the background): a first create then boots at once.
   * `newAgentSpec`: what a new agent with the default config starts with
   * (a template is built ahead of it, where the driver uses templates).
   */
  prepareFrameworks?(plugins: FrameworkPlugin[], newAgentSpec?: NewAgentSpec): Promise<void>

  /** Stops it and deletes its container, volume and folder. Irreversible. */
  remove(agentId: string): Promise<void>

  inspect(agentId: string): Promise<ContainerInfo>

  /** CPU and memory of a running container. */
  usage(agentId: string): Promise<ContainerUsage>

  /** The last `tail` lines of its output (stdout and stderr, plus the supervisor's own lines). */
  logs(agentId: string, tail: number): Promise<string[]>

  /** Its output line by line as it is written, after the last `tail` lines, until `signal` aborts. */
  followLogs(
    agentId: string,
    options: { tail?: number; signal?: AbortSignal }
  ): AsyncIterable<string>

  /** The user-facing file manager, confined to the workspace. */
  files(agentId: string): WorkspaceFiles

  /** Internal read access to state and workspace, for framework plugins (memory). */
  reader(agentId: string): AgentFileReader

  /**
   * Writes installed skills into the framework's skills folder and removes
   * uninstalled ones, whether the container runs or not (a sleeping agent
   * finds them at its next start). An agent with no container yet gets
   * them rendered at its first start.
   */
  syncSkills(agentId: string, plugin: FrameworkPlugin, change: SkillChange): Promise<void>

  onEvent(listener: RuntimeEventListener): () => void

  /**
   * Stops and forgets containers this driver runs for agents not in
   * `keepAgentIds` (deleted while the service was down). Returns their ids.
   */
  sweep(keepAgentIds: string[]): Promise<string[]>

  /** Detaches from every container without stopping it (service shutdown). */
  close(): Promise<void>

  /**
   * Stops every container this driver runs, in parallel (service shutdown
   * of a driver whose agents are the service's own children), but for the
   * agents `spare` names (another instance of the host holds them).
   */
  stopAll?(options?: { spare?: (agentId: string) => boolean }): Promise<void>

  /** Agents whose containers this driver supervises now (process driver). */
  liveAgents?(): string[]

  /** Stops supervising the agent, leaving it running: another instance takes it over. */
  detach?(agentId: string): void
}

/** `GET /agents/:id/stats` figures the runtime knows (messages come from the chat area). */
export interface RuntimeStats {
  status: ContainerState
  containerId: string | null
  uptimeSecs: number
}

/** `GET /agents/:id/monitoring` (spec: Monitoring). */
export interface MonitoringFigures extends ContainerUsage {
  restartCount: number
  /** `running` (monitoring is only answered for a running container). */
  status: 'running'
}

export interface HibernateOptions {
  /** Runs once it is settled that a checkpoint will be taken, just before it is. */
  beforeCheckpoint?: () => Promise<void>
  /**
   * No turn was sent to its framework since this run started. A run started from its
   * framework's template is then still its template: a driver may end it without a
   * checkpoint and start it from the template again.
   */
  untouched?: boolean
}

/** A chat sent through the agent's own framework. */
export interface ContainerChatRequest {
  messages: ChatTurn[]
  /** Stable id of the conversation; frameworks keep a session per id (OpenAI `user`). */
  conversationId: string
  signal?: AbortSignal
}

export interface ContainerChatReply {
  content: string
  /** The model name the framework answered with. */
  model: string
  usage?: TokenUsage
}

/** One streamed piece of a reply. */
export interface ContainerChatChunk {
  token: string
}

/** An agent's own folders, as the runtime keeps them on this host. */
export type AgentFolderName = 'workspace' | 'state' | 'home'

/**
 * Where an agent's folders lie on this host (ContainerDriver.hostFolders).
 * Everything below `root` is walked one segment at a time without
 * following links (app/runtime/files/pinned_dir.ts): the agent may have
 * planted links anywhere below it, never in `root` itself.
 */
export interface HostFolders {
  /** A folder the agent cannot change: every walk starts here. */
  root: string
  /** Each folder's path below `root` (`''`: root itself); one the driver keeps none of is absent. */
  folders: Partial<Record<AgentFolderName, string>>
  /**
   * Owner of what a restore writes there (a container's user). Absent: the
   * service's, the runtime hands the folders to the agent at its start.
   */
  owner?: { uid: number; gid: number }
}

export interface FoldersUnavailable {
  /** Why (the service's reason, shown in the 503). */
  unavailable: string
  /** True when they will be reachable once the agent's container exists (a new agent). */
  untilCreated?: boolean
}
