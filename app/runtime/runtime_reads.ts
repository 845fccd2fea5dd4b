import { AgentNotRunningException } from '#core/exceptions/api_exceptions'
import { agentPaths, ensureServiceFolder } from '#runtime/agent_paths'
import { followAgentLogs, LogRedaction } from '#runtime/agent_logs'
import { gatewayTokenFor } from '#runtime/credentials'
import type { ChatTarget } from '#runtime/chat_client'
import { WorkspaceQuota } from '#runtime/files/workspace_quota'
import { RunPlans } from '#runtime/run_plans'
import type { RuntimeServiceOptions } from '#runtime/runtime_service_types'
import type {
  ContainerDriver,
  ContainerInfo,
  FoldersUnavailable,
  HostFolders,
  MonitoringFigures,
  RuntimeStats,
  WorkspaceFiles,
} from '#runtime/types'

/** Seconds its container has been running (0 when it does not run). */
export function uptimeSecs(info: Pick<ContainerInfo, 'state' | 'startedAt'>): number {
  if (info.state !== 'running' || !info.startedAt) return 0
  return Math.max(0, Math.floor((Date.now() - info.startedAt.getTime()) / 1000))
}

/**
 * What the agents area reads of an agent through the runtime service (the
 * base of RuntimeService): status, stats, monitoring, logs (secrets
 * redacted), workspace files (within the quota) and memory, running or at
 * rest. Container-only reads throw AgentNotRunningException (409) when the
 * agent's container is not running.
 */
export class RuntimeReads {
  readonly driver: ContainerDriver
  /** The run each agent is to have next (planRun). */
  protected readonly plans = new RunPlans()
  /** Each agent's secrets, never in a log answer. */
  protected readonly redaction = new LogRedaction()
  readonly #quota: WorkspaceQuota

  constructor(protected readonly options: RuntimeServiceOptions) {
    this.driver = options.driver
    this.#quota = new WorkspaceQuota(
      options.agentsDir,
      () => this.options.capacity?.workspaceQuotaMb
    )
  }

  /** The agent's gateway token, made on first use (kept in its service folder). */
  protected async gatewayToken(agentId: string) {
    const paths = agentPaths(this.options.agentsDir, agentId)
    await ensureServiceFolder(paths)
    return gatewayTokenFor(paths.credentialsFile)
  }

  /** The driver's view, with the id of a run scheduled but not yet up (planRun). */
  async status(agentId: string): Promise<ContainerInfo> {
    const info = await this.driver.inspect(agentId)
    return { ...info, containerId: this.plans.scheduled(agentId) ?? info.containerId }
  }

  async isRunning(agentId: string): Promise<boolean> {
    const info = await this.driver.inspect(agentId)
    return info.state === 'running'
  }

  /**
   * Where a chat reaches the agent's framework: one inspect; null when its
   * container does not run. The chat area resolves it once per message and
   * hands it back to `chat` / `chatStream`.
   */
  async target(agentId: string): Promise<ChatTarget | null> {
    const info = await this.driver.inspect(agentId)
    if (info.state !== 'running' || !info.baseUrl || !info.framework) return null
    const plugin = this.options.frameworks.framework(info.framework)
    const endpoint = plugin.chatEndpoint({
      agentId,
      gatewayToken: await this.gatewayToken(agentId),
    })
    return {
      url: `${info.baseUrl}${endpoint.path}`,
      headers: endpoint.headers,
      model: endpoint.model,
    }
  }

  protected async requireRunning(agentId: string): Promise<ContainerInfo> {
    const info = await this.driver.inspect(agentId)
    if (info.state !== 'running' || !info.baseUrl || !info.framework) {
      throw new AgentNotRunningException()
    }
    return info
  }

  /** Uptime and container id (the chat area adds messagesProcessed and lastActiveAt). */
  async stats(agentId: string): Promise<RuntimeStats> {
    const info = await this.driver.inspect(agentId)
    return {
      status: info.state,
      containerId: this.plans.scheduled(agentId) ?? info.containerId,
      uptimeSecs: uptimeSecs(info),
    }
  }

  /** CPU, memory, limit and restart count of a running container. */
  async monitoring(agentId: string): Promise<MonitoringFigures> {
    const info = await this.requireRunning(agentId)
    const usage = await this.driver.usage(agentId)
    return { ...usage, restartCount: info.restartCount, status: 'running' }
  }

  /** The last `tail` lines (default 100) as plain text; also for a stopped agent. */
  async logs(agentId: string, options: { tail?: number } = {}): Promise<string> {
    const tail = Math.max(0, Math.min(options.tail ?? 100, 10_000))
    const lines = await this.driver.logs(agentId, tail)
    return lines.map((line) => this.redaction.redact(agentId, line)).join('\n')
  }

  /**
   * Live output line by line (for SSE), after the last `tail` lines (default
   * 0), until `signal` aborts. Only for a running agent.
   */
  async followLogs(
    agentId: string,
    options: { tail?: number; signal?: AbortSignal } = {}
  ): Promise<AsyncIterable<string>> {
    return followAgentLogs(this.driver, agentId, options, (line) =>
      this.redaction.redact(agentId, line)
    )
  }

  /** The workspace file manager of a running agent. */
  async files(agentId: string): Promise<WorkspaceFiles> {
    await this.requireRunning(agentId)
    return this.#quota.wrap(agentId, this.driver.files(agentId))
  }

  /** True when the agent's own writes took its workspace past the quota. */
  async workspaceOverQuota(agentId: string): Promise<boolean> {
    return this.#quota.overQuota(agentId)
  }

  /** 400 when the agent's workspace is over its quota (it may not start until it is not). */
  async assertWorkspaceStartable(agentId: string): Promise<void> {
    await this.#quota.assertStartable(agentId)
  }

  /**
   * The workspace of an agent that is asleep (its container stopped, its
   * folders on disk), without waking it. The agents area decides who may.
   */
  filesAtRest(agentId: string): WorkspaceFiles {
    return this.#quota.wrap(agentId, this.driver.files(agentId))
  }

  /**
   * Runs `work` with the agent's running container frozen (a backup's copy
   * of its folders, ContainerDriver.whileFrozen); it runs on after.
   * Undefined, `work` not run, where the driver cannot freeze it.
   */
  async whileFrozen<T>(agentId: string, work: () => Promise<T>) {
    return this.driver.whileFrozen?.(agentId, work)
  }

  /** Where the agent's folders lie on this host for a backup, or why they cannot be reached. */
  async hostFolders(agentId: string): Promise<HostFolders | FoldersUnavailable> {
    if (this.driver.hostFolders) return this.driver.hostFolders(agentId)
    return { unavailable: `the ${this.driver.name} driver keeps no agent folders on this host` }
  }

  /** The memory store of an agent that is asleep, read from disk. */
  memoryAtRest(agentId: string, framework: string): Promise<Record<string, string>> {
    return this.options.frameworks.framework(framework).readMemory(this.driver.reader(agentId))
  }

  /** `{ memory }`: the framework's memory store, read by its plugin. */
  async memory(agentId: string): Promise<Record<string, string>> {
    const info = await this.requireRunning(agentId)
    const plugin = this.options.frameworks.framework(info.framework!)
    return plugin.readMemory(this.driver.reader(agentId))
  }
}
