import type { RestartPolicy, SupervisorSettings } from '#runtime/process/prepared_launch'
import type { AgentNetworkSettings } from '#runtime/process/agent_network/network_settings'
import type { SandboxMode } from '#runtime/process/sandbox'
import { assertAgentId } from '#runtime/agent_paths'
import type { HostFolders } from '#runtime/types'

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
   * checkpoint instead of a cold boot (app/runtime/process/template.ts).
   * True: every framework that allows it (AGENT_TEMPLATES=on); false: none
   * (AGENT_TEMPLATES=off); unset: those whose plugin has them on by default
   * (OpenClaw). Needs checkpoints, the root layout, agent network
   * namespaces and gcc (the file identity library).
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

/** How the driver supervises its agents: the options' restart policy and timings, or defaults. */
export function supervisorSettings(
  options: ProcessDriverOptions,
  launchesRefused: () => boolean
): SupervisorSettings {
  return {
    restart: { ...DEFAULT_RESTART, ...options.restart },
    stopGraceMs: options.stopGraceMs ?? 10_000,
    pollIntervalMs: options.pollIntervalMs ?? 1000,
    launchesRefused,
  }
}

/**
 * Where a backup finds an agent of this driver (ContainerDriver.hostFolders):
 * workspace, state and home below the `agentsDir` option
 * (`<agents>/<id>/...`, the id's folder being the service's). A restore
 * writes them as the service; the next start hands them to the agent.
 */
export function hostFoldersOf(agentsDir: string, agentId: string): HostFolders {
  assertAgentId(agentId)
  return {
    root: agentsDir,
    folders: {
      workspace: `${agentId}/workspace`,
      state: `${agentId}/state`,
      home: `${agentId}/home`,
    },
  }
}
