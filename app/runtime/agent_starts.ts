import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import { enterPhase } from '#runtime/boot_phases'
import type { BootPriority, CapacityManager } from '#runtime/capacity/capacity_manager'
import { PreparationQueue } from '#runtime/capacity/preparation_queue'
import type { RunPlans } from '#runtime/run_plans'
import type { FrameworkResolver } from '#runtime/runtime_service_types'
import type { AgentRuntimeSpec, ContainerDriver, ContainerInfo } from '#runtime/types'

/** How long a boot past the readiness timeout is still watched for its first answer. */
const SLOW_BOOT_WATCH_MS = 15 * 60_000

/** What a start needs of the runtime service around it. */
export interface AgentStartsOptions {
  driver: ContainerDriver
  frameworks: FrameworkResolver
  capacity: CapacityManager
  plans: RunPlans
  /** True when the agent's framework answered its readiness path since its start. */
  isReady(agentId: string): boolean
  /** Prepares the agent's container (rendered config, launch) to run as `runId`. */
  create(spec: AgentRuntimeSpec, runId: string | undefined): Promise<ContainerInfo>
  waitUntilReady(agentId: string, options?: { timeoutMs?: number }): Promise<void>
  /** Most starts preparing their container at once (0: no limit); default PREPARES_AT_ONCE. */
  preparesAtOnce?: number
}

/**
 * Starts preparing at once by default. A preparation (rendered files, the
 * agent's network namespace and cgroups, ~40 ms of the service's CPU and a
 * few `ip` commands) is short alone; 100 at once all finished together
 * after 4.3 s. Bounded and in the boot queue's fair order, one account's
 * burst of starts does not hold another account's first start in
 * "preparing" for the whole burst (docs/runtime.md "Preparations before
 * the queue").
 */
const PREPARES_AT_ONCE = 8

/**
 * An agent's start through the capacity manager (docs/runtime.md
 * "Capacity"): a live container is adopted and counted; otherwise the start
 * waits in the boot queue for a boot slot and its memory, and holds the
 * slot until the framework is ready. A run no longer wanted boots nothing.
 */
export class AgentStarts {
  readonly #prepares: PreparationQueue

  constructor(private readonly options: AgentStartsOptions) {
    this.#prepares = new PreparationQueue(options.preparesAtOnce ?? PREPARES_AT_ONCE)
  }

  /** `askedAt`: when the start was asked for (its place among waiting starts); default now. */
  async startOrAdopt(
    spec: AgentRuntimeSpec,
    runId?: string,
    priority?: BootPriority,
    askedAt = Date.now()
  ): Promise<{ info: ContainerInfo; adopted: boolean }> {
    try {
      return await this.#startOrAdoptRun(spec, runId, priority, askedAt)
    } catch (error) {
      this.options.plans.settled(spec.agentId, runId)
      throw error
    }
  }

  async #startOrAdoptRun(
    spec: AgentRuntimeSpec,
    runId: string | undefined,
    priority: BootPriority | undefined,
    askedAt: number
  ): Promise<{ info: ContainerInfo; adopted: boolean }> {
    const { driver, capacity, plans } = this.options
    const plugin = this.options.frameworks.framework(spec.framework)
    const reservedMb = spec.resources?.memoryMb ?? plugin.resources.memoryMb
    enterPhase(spec.agentId, 'preparing')
    plans.assertWanted(spec.agentId, runId)
    const turn = {
      agentId: spec.agentId,
      owner: spec.ownerId ?? spec.agentId,
      priority: priority ?? 'interactive',
      askedAt,
    }
    const created = await this.#prepares.run(turn, () => this.options.create(spec, runId))
    if (
      created.state === 'running' ||
      created.state === 'starting' ||
      created.state === 'restarting'
    ) {
      // Already running (adopted after a service restart, or started meanwhile):
      // counted against the budget, and `running` once it answers. Its own id stands.
      plans.settled(spec.agentId, runId)
      capacity.adopt(spec.agentId, reservedMb)
      if (!this.options.isReady(spec.agentId)) {
        this.options
          .waitUntilReady(spec.agentId)
          .catch((error) => this.#watchSlowBoot(spec.agentId, error))
      }
      return { info: created, adopted: true }
    }
    // Waits in the boot queue until a boot slot and its memory are free. Whether the
    // start resumes a checkpoint (a wake; a template restore would say so here too)
    // is the driver's to tell: such starts go before cold boots of their class.
    plans.assertWanted(spec.agentId, runId)
    const resumes = driver.resumes?.(spec.agentId) === true
    enterPhase(spec.agentId, 'queued')
    await capacity.admit(spec.agentId, reservedMb, {
      resumes,
      owner: spec.ownerId,
      priority,
      askedAt,
    })
    enterPhase(spec.agentId, resumes ? 'restoring' : 'booting')
    let info: ContainerInfo
    try {
      // Stopped or restarted while it waited for its turn: no boot.
      plans.assertWanted(spec.agentId, runId)
      info = await driver.start(spec.agentId)
    } catch (error) {
      capacity.release(spec.agentId)
      throw error
    }
    this.#watchBoot(spec.agentId)
    return { info, adopted: false }
  }

  /** Holds the boot slot until the framework is ready (or its boot failed), then frees it. */
  #watchBoot(agentId: string) {
    this.options
      .waitUntilReady(agentId)
      .catch((error) => this.#watchSlowBoot(agentId, error))
      .finally(() => this.options.capacity.booted(agentId))
  }

  /**
   * A framework past the readiness timeout (a loaded host) frees its boot
   * slot but is still watched, so it shows `running` once it answers
   * instead of `starting` for good.
   */
  #watchSlowBoot(agentId: string, error: unknown) {
    if (!(error instanceof ServiceUnavailableException)) return
    this.options.waitUntilReady(agentId, { timeoutMs: SLOW_BOOT_WATCH_MS }).catch(() => {})
  }
}
