import type { ProcessLaunch } from '#plugins/types'
import type { AgentCgroup } from '#runtime/process/cgroups'
import type { AgentCheckpoint, NamedMount } from '#runtime/process/checkpoint'
import type { TemplateFallback } from '#runtime/process/template'

/** Wraps a launch (the framework's, CRIU's) so that it runs where the agent's does (its network). */
export type Wrap = (launch: { command: string; args: string[] }) => {
  command: string
  args: string[]
}

/** How the supervisor restarts a crashed agent. */
export interface RestartPolicy {
  /** First delay; doubles after each consecutive crash. */
  baseDelayMs: number
  maxDelayMs: number
  /** Consecutive crashes restarted before the agent is given up on (`error`). */
  maxConsecutiveRestarts: number
  /** A run at least this long resets the consecutive-crash count. */
  stableAfterMs: number
}

export interface SupervisorSettings {
  restart: RestartPolicy
  stopGraceMs: number
  pollIntervalMs: number
  /** True once the service is stopping: no run is launched any more (boot, wake, crash restart). */
  launchesRefused?: () => boolean
}

/** What the driver prepared for the next (re)start. */
export interface PreparedLaunch {
  framework: string
  launch: ProcessLaunch
  /** The agent's own user and group id (app/runtime/process/sandbox.ts); unset: the service's. */
  uid?: number
  gid?: number
  env: Record<string, string>
  port: number
  /**
   * Where the service reaches the gateway: the agent's address in its own
   * network namespace (app/runtime/process/agent_network); unset: 127.0.0.1.
   */
  gatewayHost?: string
  memoryLimitMb: number
  /**
   * The agent's own cgroups (app/runtime/process/cgroups.ts): the kernel
   * enforces its limits, so the memory watcher stands down. Unset where
   * cgroups are not writable.
   */
  cgroup?: AgentCgroup
  /** Files opened read-only as descriptors 3, 4, … at each spawn (the sandbox's seccomp program). */
  inheritFiles: string[]
  /**
   * Where a sleep checkpoints the agent and a wake restores it
   * (app/runtime/process/checkpoint.ts); unset where that cannot work.
   */
  checkpoint?: {
    store: AgentCheckpoint
    /** The sandbox's root folder, restored on top of. */
    rootDir: string
    /** The agent's uid, which CRIU runs with. */
    uid: number
    /** This launch's fingerprint: a checkpoint of another launch is never restored. */
    fingerprint: string
    /** Runs CRIU inside the agent's network namespace, where the launch ran (when it has one). */
    enter?: Wrap
    /** The fixed layout's binds, which CRIU records and restores by name. */
    mounts?: NamedMount[]
  }
  /**
   * A new agent's first start from a template checkpoint
   * (app/runtime/process/template.ts); used once, then unset.
   */
  template?: TemplateStart
}

/** What a start from a template needs of the driver. */
export interface TemplateStart {
  /** The agent's own copy of the images, or why it cannot have one (then a counted cold boot). */
  copy(): Promise<{ dir: string } | { fallback: TemplateFallback; reason: string }>
  /**
   * After CRIU restored the copy (the framework is `pid`): makes the framework
   * take the agent's own token; an error message when it did not.
   */
  personalise(pid: number): Promise<string | undefined>
  /** How this start went: restored, or the reason it booted cold. */
  report(outcome: 'restored' | TemplateFallback, reason?: string): void
}
