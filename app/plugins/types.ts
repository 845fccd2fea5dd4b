/**
 * The two kinds of plugin found under plugins/<name>/index.ts. Each folder's
 * index exports one definition (default export) built with definePlugin().
 * Adding a framework or a channel means adding a folder; the core never
 * names a plugin.
 */

export type PluginKind = 'framework' | 'channel'

interface PluginIdentity<K extends PluginKind> {
  kind: K
  /** Unique name; the framework name stored on agents or the channel name. */
  name: string
  /** Semantic version of the plugin itself. */
  version: string
  description?: string
}

/* ---------------------------------------------------------------------------
 * Framework runtime adapters (openclaw, hermes, ...)
 * ------------------------------------------------------------------------- */

/** One chat turn in OpenAI form, as sent to the framework's /v1/chat/completions. */
export interface ChatTurn {
  role: 'system' | 'user' | 'assistant'
  content: string
}

/** What the service knows about an agent when it asks a framework for something. */
export interface AgentRuntimeContext {
  agentId: string
  /** The agent's decrypted config (secrets in clear, never logged). */
  config: Record<string, unknown>
  /** Where the framework reaches hosted models: the service's model proxy. */
  modelProxy: { baseUrl: string; token: string; model: string }
  /** Which driver runs the agent: decides bind addresses and paths. */
  driver: 'process' | 'docker' | 'kubernetes'
  /**
   * Port the framework's HTTP server listens on: a free loopback port for the
   * process driver, the plugin's `defaultPort` inside a container.
   */
  port: number
  /** Per-agent secret the service uses to call the framework's API (32+ characters). */
  gatewayToken: string
  /**
   * The agent's state and workspace folders as the framework sees them:
   * host paths for the process driver, the plugin's `containerPaths` inside
   * a container.
   */
  paths: { state: string; workspace: string }
}

/** One installed skill: its catalogue id (the folder name) and its SKILL.md text. */
export interface AgentSkillFile {
  id: string
  content: string
}

/** A file the adapter wants written before the framework starts (and on reconfigure). */
export interface RenderedFile {
  /** Relative to the area named by `root`; never absolute, never `..`. */
  path: string
  root: 'state' | 'workspace'
  content: string
  /** File mode; 0o600 for files holding secrets. Default 0o644. */
  mode?: number
  /**
   * Written only when missing (seed files the framework then owns, such as
   * an empty memory store). Otherwise the file is rewritten on every start,
   * the config being its source of truth.
   */
  onlyIfMissing?: boolean
}

/** How to launch the framework as a local child process (process driver). */
export interface ProcessLaunch {
  command: string
  args: string[]
  /**
   * Added to a minimal environment built from scratch (PATH, HOME, TMPDIR,
   * XDG_*, LANG): nothing of the service's own environment reaches the child.
   */
  env: Record<string, string>
}

/** Services the process driver lends a plugin while it prepares a launch. */
export interface ProcessLaunchTools {
  /** Absolute path of the Node.js executable running the service. */
  nodeExecutable: string
  /**
   * Installs `name@version` from the npm registry into the service's runtime
   * cache on first use (like an image pull, progress logged) and returns the
   * installed package's folder. Never touches the service's own dependencies.
   */
  ensureNpmPackage(name: string, version: string): Promise<{ packageDir: string }>
  /** Progress and diagnostics, shown in the service log and the agent's log. */
  log(message: string): void
}

/** How to launch the framework as a container (docker and kubernetes drivers). */
export interface ContainerLaunch {
  /** Pinned image reference. */
  image: string
  /** Overrides the image's command when set. */
  command?: string[]
  env: Record<string, string>
  /** `uid:gid` to run as inside the container (image default when unset); rendered files get this owner. */
  user?: string
}

/** Paths, seen from the service, of one agent's local folders (process driver). */
export interface AgentFolders {
  root: string
  state: string
  workspace: string
  home: string
  tmp: string
  cache: string
}

/** Resource limits for one agent; the docker driver enforces them, the process driver reports and watches memory. */
export interface AgentResources {
  memoryMb: number
  cpus: number
  pids: number
}

/** Read-only access to an agent's state and workspace, whichever driver runs it. */
export interface AgentFileReader {
  /** UTF-8 text of a file relative to the area, or undefined when it does not exist. */
  readText(root: 'state' | 'workspace', path: string): Promise<string | undefined>
  /** Entries of a directory relative to the area; [] when it does not exist. */
  list(
    root: 'state' | 'workspace',
    path: string
  ): Promise<Array<{ name: string; type: 'file' | 'directory' }>>
}

export interface FrameworkAdapter {
  /**
   * Validates and normalises the framework-specific part of an agent's
   * config. Throws a ValidationException naming the field when it is wrong.
   */
  validateConfig(config: Record<string, unknown>): Record<string, unknown>

  /** Files (config, SOUL.md, ...) to write before start and on reconfigure. */
  renderFiles(context: AgentRuntimeContext): RenderedFile[] | Promise<RenderedFile[]>

  /** Launch for the process driver; may install the framework on first use. */
  processLaunch(
    context: AgentRuntimeContext,
    folders: AgentFolders,
    tools: ProcessLaunchTools
  ): ProcessLaunch | Promise<ProcessLaunch>

  /** Launch for container drivers. */
  containerLaunch(context: AgentRuntimeContext): ContainerLaunch

  /** Port the framework listens on inside a container. */
  defaultPort: number

  /**
   * Inside a container: `state` is where the persistent volume is mounted,
   * `workspace` the file manager's root (usually inside `state`).
   */
  containerPaths: { state: string; workspace: string }

  /** Default limits; an agent's own limits (from its plan) override them. */
  resources: AgentResources

  /** HTTP path answering 2xx once the framework can chat. */
  readinessPath: string

  /**
   * Where the framework loads AgentSkills folders from (`<dir>/<id>/SKILL.md`
   * under `root`), and whether it picks up a changed skill by itself
   * (`watch`) or needs a gateway restart (`restart`). The drivers write the
   * installed skills there at every start; without it, skills cannot be
   * installed on the framework's agents.
   */
  skillsDir?: { root: 'state' | 'workspace'; path: string; reload: 'watch' | 'restart' }

  /** Path and headers of the OpenAI-compatible chat endpoint inside the agent. */
  chatEndpoint(context: Pick<AgentRuntimeContext, 'agentId' | 'gatewayToken'>): {
    path: string
    headers: Record<string, string>
    model: string
  }

  /** The agent's memory as string pairs, read from its state or workspace. */
  readMemory(files: AgentFileReader): Promise<Record<string, string>>
}

export interface FrameworkPlugin extends PluginIdentity<'framework'>, FrameworkAdapter {}

/* ---------------------------------------------------------------------------
 * Channel connectors (telegram, discord, whatsapp, twitter, ...)
 * ------------------------------------------------------------------------- */

export interface InboundMessage {
  /** Channel-side id of the conversation (chat id, DM id, phone number). */
  conversationId: string
  senderName?: string
  text: string
}

export interface ChannelContext {
  agentId: string
  /** The channel's credentials from the agent's config (decrypted). */
  credentials: Record<string, unknown>
  /** Hands an inbound message to the agent and resolves with its reply text. */
  deliver(message: InboundMessage): Promise<string>
  log: (message: string, detail?: Record<string, unknown>) => void
}

export interface ChannelStatus {
  connected: boolean
  /** Channel-specific detail when connected (`username` for telegram, `phone` for whatsapp). */
  [detail: string]: unknown
}

export interface ChannelConnection {
  /** Sends text to a conversation on the channel. */
  send(conversationId: string, text: string): Promise<void>
  status(): ChannelStatus
  close(): Promise<void>
}

export interface ChannelConnector {
  /** Validates the credentials a user configures for this channel. */
  validateCredentials(credentials: Record<string, unknown>): Record<string, unknown>

  /** QR-code pairing for channels that need it (whatsapp); absent otherwise. */
  pair?(context: ChannelContext): Promise<{ qrCode: string; expiresIn: number }>

  /** Connects and starts delivering inbound messages to context.deliver. */
  connect(context: ChannelContext): Promise<ChannelConnection>
}

export interface ChannelPlugin extends PluginIdentity<'channel'>, ChannelConnector {}

export type Plugin = FrameworkPlugin | ChannelPlugin

/** Identity helper that gives plugin authors type checking. */
export function definePlugin<P extends Plugin>(plugin: P): P {
  return plugin
}
