import type { PluginIdentity } from '#plugins/types'

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
  /**
   * The same for Python frameworks: a virtual environment named `name`
   * holding exactly `requirements` (each pinned, `pkg==1.2.3`), installed
   * with the host's python3 and pip on first use; returns its folder.
   */
  ensurePythonPackages(name: string, requirements: string[]): Promise<{ venvDir: string }>
  /** Progress and diagnostics, shown in the service log and the agent's log. */
  log(message: string): void
  /** Says which slow step of the start runs now (the API's `phase`, app/runtime/boot_phases.ts). */
  phase?(step: 'installing' | 'warming'): void
  /**
   * Set unless shared compile caches are off (AGENT_COMPILE_CACHE=off): `dir`
   * is where a framework keeps warm caches shared by all agents (in the
   * runtime cache, read-only to agents), `uid` the user id this agent's
   * processes run under (what Node names its cache folders after).
   */
  compileCache?: { dir: string; uid: number }
  /**
   * The agent's folders on the host, set when the launch's `folders` are the
   * fixed in-sandbox ones (`template` frameworks): where the plugin's own
   * work on the host (seeding a cache into TMPDIR) goes.
   */
  hostFolders?: AgentFolders
}

/**
 * How the docker driver builds an image on its own host when `image` cannot
 * be pulled (no registry reachable) or AGENT_IMAGES=local: this host's
 * Node.js at /usr/local/bin/node, an unprivileged user 1000 with home
 * /data, and `npmPackages` from the runtime cache at /opt/<name> (the
 * package itself at /opt/<name>/node_modules/<name>).
 */
export interface LocalImageRecipe {
  /** Tag of the built image; name the framework and Node versions in it. */
  tag: string
  npmPackages?: Array<{ name: string; version: string }>
  /**
   * A Python environment of the runtime cache (its venv, made with the
   * host's /usr/bin/python3), copied to /opt/<name> together with that
   * interpreter, its standard library and the shared libraries its
   * extension modules load.
   */
  pythonEnvironment?: { name: string; requirements: string[] }
  /** The image's command. */
  command: string[]
  /** Folders made in the image, writable by the agent's user (a new volume mounted there copies them). */
  writableDirs?: string[]
  /** Finishes the installed packages on this host before they are copied (the image is read-only). */
  prepare?(packages: Array<{ name: string; packageDir: string }>): Promise<unknown>
}

/** How to launch the framework as a container (docker and swarm drivers). */
export interface ContainerLaunch {
  /** Pinned image reference. */
  image: string
  /** The image built locally instead when `image` cannot be pulled. */
  localImage?: LocalImageRecipe
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

  /**
   * Installs the framework on this host and makes what its agents share
   * (a warm compile cache), with no agent yet: the process driver calls it
   * at service start so that no user's first create waits for it.
   */
  prepareHost?(tools: ProcessLaunchTools): Promise<void>

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

  /**
   * The framework's first turn does one-time work that takes seconds
   * (OpenClaw: ~8 s of CPU). When set, a gateway that has had no turn gets a
   * private one (app/runtime/warm_up.ts) before its first checkpoint, so a
   * wake does not pay that work again on a user's message.
   */
  warmUpBeforeCheckpoint?: boolean

  /**
   * New agents may start from a template checkpoint instead of a cold boot
   * (process driver, docs/runtime.md "New agents from a template"). Its
   * agents then run in the fixed layout: `context.paths` and the launch's
   * folders are the same for every agent (`/agent/...`), and `context.port`
   * is `defaultPort` in the agent's own network namespace.
   */
  template?: {
    /**
     * What of the config changes the framework's boot: agents with equal
     * shapes share a template, which is booted from this shape alone (so it
     * must hold no secret). Undefined: this config never starts from one.
     */
    shape(config: Record<string, unknown>): Record<string, unknown> | undefined
    /**
     * The signal on which the framework re-reads its rendered files (the
     * agent's own config). Its gateway and model proxy tokens are also
     * replaced in its memory where they are held as written (the template's
     * are as long as an agent's); the check below decides.
     */
    reloadSignal?: NodeJS.Signals
    /**
     * A GET path answering 2xx only to the gateway token the framework holds
     * (chatEndpoint's headers): a started agent must answer to its own and
     * refuse the template's, or it is killed and booted.
     */
    tokenCheckPath: string
    /**
     * Its new agents start from templates unless AGENT_TEMPLATES=off (others
     * only with AGENT_TEMPLATES=on).
     */
    onByDefault?: boolean
  }

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
