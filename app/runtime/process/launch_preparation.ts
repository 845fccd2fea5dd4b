import { createHash } from 'node:crypto'
import { join } from 'node:path'
import type { FrameworkPlugin, RenderedFile } from '#plugins/types'
import type { AgentPaths } from '#runtime/agent_paths'
import { renderedSkillFiles } from '#runtime/skill_files'
import type { CreateRequest } from '#runtime/types'
import type { PreparedLaunch } from '#runtime/process/prepared_launch'
import { agentOwner, writeRenderedFiles } from '#runtime/process/agent_files'
import type { AgentNetworking } from '#runtime/process/agent_network/agent_networking'
import { AgentCgroup, cgroupBases } from '#runtime/process/cgroups'
import { criu, type AgentCheckpoint } from '#runtime/process/checkpoint'
import { AGENT_MARKER_VARIABLE, buildChildEnv } from '#runtime/process/child_env'
import { compiledFilesDir } from '#runtime/process/compiled_c'
import { fileIdentityShim } from '#runtime/process/file_identities'
import { ownRandomnessPreload, withPreload } from '#runtime/process/own_randomness'
import type { FrameworkInstalls } from '#runtime/process/framework_installs'
import type { LogFile } from '#runtime/process/log_file'
import {
  FIXED_FOLDERS,
  agentRunUid,
  agentUid,
  fixedLayoutAvailable,
  sandboxLaunch,
  type SandboxMode,
  type SandboxedLaunch,
} from '#runtime/process/sandbox'
import { ioUringFilterFile } from '#runtime/process/seccomp'
import { templateFingerprint } from '#runtime/process/template'

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
/** The files templates need whose absence was said (once per process). */
const missingSaid = new Set<string>()

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

export interface LaunchPreparerOptions {
  /** `<storage>/agents`: one folder per agent. */
  agentsDir: string
  /** `<storage>/runtime`: read-only to agents. */
  cacheDir: string
  /** Node.js for frameworks that run on Node. */
  nodeExecutable: string
  /** AGENT_SANDBOX (app/runtime/process/sandbox.ts). */
  sandbox?: SandboxMode
  /** False: a sleep never checkpoints (AGENT_CHECKPOINT=off). */
  checkpoints?: boolean
  /** New agents may start from a template: all that allow it, none, or by default (unset). */
  templates?: boolean
  network: AgentNetworking
  installs: FrameworkInstalls
  /** The service's log, and at warning level. */
  log: (message: string) => void
  warn: (message: string) => void
}

/** One agent's launch to prepare (ProcessDriver's create). */
export interface LaunchRequest {
  request: Pick<CreateRequest, 'spec' | 'plugin' | 'gatewayToken'>
  paths: AgentPaths
  port: number
  /** In the fixed layout (fixedLayout()). */
  fixed: boolean
  /** The plugin's template shape of its config, in the fixed layout. */
  shape?: Record<string, unknown>
  /** Where the agent's checkpoint lives. */
  checkpoint: AgentCheckpoint
  logFile: LogFile
}

export interface PreparedAgentLaunch {
  /** What the agent's next (re)start runs (no template start yet: the driver decides). */
  prepared: PreparedLaunch
  /** What a template of this launch holds: the same for every agent of this framework and shape. */
  templateFingerprint?: string
}

/**
 * Prepares an agent's launch: its network namespace, rendered files and
 * skills, the plugin's launch (installing the framework on first use), the
 * sandbox around it, its cgroups, its environment and whether a sleep may
 * checkpoint it.
 */
export class LaunchPreparer {
  /** The sandbox kinds the log has named (saySandbox). */
  readonly #sandboxSaid = new Set<string>()

  constructor(private readonly options: LaunchPreparerOptions) {}

  async prepare({
    request: { spec, plugin, gatewayToken },
    paths,
    port,
    fixed,
    shape,
    checkpoint,
    logFile,
  }: LaunchRequest): Promise<PreparedAgentLaunch> {
    const network = await this.options.network.prepare(spec.agentId, spec.modelProxy)
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
    const rendered = [
      ...(await plugin.renderFiles(context)),
      ...renderedSkillFiles(plugin, spec.skills),
    ]
    await writeRenderedFiles(paths, rendered, agentOwner(spec.agentId))
    const launch = await plugin.processLaunch(
      context,
      fixed ? FIXED_FOLDERS : paths,
      this.options.installs.forAgent(spec.agentId, {
        uid: agentRunUid(spec.agentId),
        logFile,
        ...(fixed ? { hostFolders: paths } : {}),
      })
    )

    let sandboxed
    try {
      sandboxed = await sandboxLaunch({
        mode: this.options.sandbox,
        agentId: spec.agentId,
        paths,
        launch,
        readOnly: [this.options.cacheDir, this.options.nodeExecutable],
        maxProcesses: spec.resources?.pids ?? plugin.resources.pids,
        seccompFile: await ioUringFilterFile(join(this.options.cacheDir, 'sandbox')),
        fixedLayout: fixed,
      })
    } catch (error) {
      // No sandbox for it here: its owner reads why in its log (and its status is error).
      logFile.note((error as Error).message)
      throw error
    }
    saySandbox(sandboxed, this.#sandboxSaid, this.options.log, this.options.warn)
    const memoryLimitMb = spec.resources?.memoryMb ?? plugin.resources.memoryMb
    const cgroup = await this.#cgroup(spec.agentId, {
      memoryMb: memoryLimitMb,
      cpus: spec.resources?.cpus ?? plugin.resources.cpus,
      pids: spec.resources?.pids ?? plugin.resources.pids,
    })

    const env = buildChildEnv({
      agentId: spec.agentId,
      paths: fixed ? fixedEnvPaths(paths) : paths,
      nodeExecutable: this.options.nodeExecutable,
      pluginEnv: launch.env,
      ...(fixed ? { agentsDir: this.options.agentsDir } : {}),
    })
    // The fixed layout is what templates are taken of and restored into: every process of
    // it keeps the identities of the files the template saw (file_identities.ts).
    const shim = fixed ? this.#fileIdentityShim() : undefined
    if (shim) env.LD_PRELOAD = shim
    // And no random values its Node.js processes drew ahead are a template's (own_randomness.ts).
    const preload = fixed ? this.#ownRandomness() : undefined
    if (preload) env.NODE_OPTIONS = withPreload(env.NODE_OPTIONS, preload)
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
          node: this.options.nodeExecutable,
          modelProxy: { baseUrl: network.modelProxy.baseUrl, model: network.modelProxy.model },
        })
      : undefined
    // Whatever the sandbox, the launch runs in the agent's network namespace.
    const entered = network.enter(sandboxed)
    const prepared: PreparedLaunch = {
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
    return { prepared, templateFingerprint: fingerprint }
  }

  /** The agent's cgroups with these limits, where this host lets the service make them. */
  async #cgroup(
    agentId: string,
    limits: { memoryMb: number; cpus?: number; pids: number }
  ): Promise<AgentCgroup | undefined> {
    const bases = cgroupBases()
    sayLimits(bases !== undefined, this.options.log)
    if (!bases) return undefined
    const cgroup = new AgentCgroup(agentId, bases)
    try {
      await cgroup.apply(limits)
      return cgroup
    } catch (error) {
      // A limit the kernel refuses (below what a running agent uses): the watcher takes over.
      this.options.log(`agent ${agentId}: cgroup limits not applied (${(error as Error).message})`)
      return undefined
    }
  }

  /** True when a sleep here may checkpoint an agent in this sandbox (said once when not). */
  #checkpointing(rootDir: string | undefined): boolean {
    if (this.options.checkpoints === false) return false
    const { path, reason } = criu()
    if (path && rootDir) return true
    if (!checkpointsSaid) {
      checkpointsSaid = true
      this.options.log(
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
  /** The plugin's template shape of `config` where its agents run in the fixed layout here. */
  templateShape(
    plugin: FrameworkPlugin,
    config: Record<string, unknown>
  ): Record<string, unknown> | undefined {
    return this.fixedLayout(plugin) ? plugin.template?.shape(config) : undefined
  }

  fixedLayout(plugin: FrameworkPlugin): boolean {
    return (
      plugin.template !== undefined &&
      (this.options.templates ?? plugin.template.onByDefault === true) &&
      this.options.checkpoints !== false &&
      criu().path !== undefined &&
      this.options.network.networks !== undefined &&
      fixedLayoutAvailable() &&
      this.#fileIdentityShim() !== undefined &&
      this.#ownRandomness() !== undefined
    )
  }

  /** The random state preload's path (written on first use); undefined, said once, without one. */
  #ownRandomness(): string | undefined {
    return this.#sandboxFile('the random state preload', ownRandomnessPreload)
  }

  /** The file identity library's path (built on first use); undefined, said once, without one. */
  #fileIdentityShim(): string | undefined {
    return this.#sandboxFile('the file identity library', fileIdentityShim)
  }

  /** A file templates need in the runtime cache's `sandbox/`; why not, said once per file. */
  #sandboxFile(
    what: string,
    make: (dir: string) => { path: string } | { reason: string }
  ): string | undefined {
    const file = make(compiledFilesDir(this.options.cacheDir))
    if ('path' in file) return file.path
    if (!missingSaid.has(what)) {
      missingSaid.add(what)
      this.options.log(`no template starts: ${what} is missing: ${file.reason}`)
    }
    return undefined
  }
}
