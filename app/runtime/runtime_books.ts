import { knownPhase } from '#runtime/boot_phases'
import { CapacityManager, type CapacitySnapshot } from '#runtime/capacity/capacity_manager'
import { RunTracker } from '#runtime/run_tracker'
import { RuntimeReads } from '#runtime/runtime_reads'
import type {
  ContainerView,
  RuntimeServiceOptions,
  RuntimeSnapshot,
} from '#runtime/runtime_service_types'

/**
 * The runtime service's books (the base of RuntimeService): the capacity
 * manager's boot queue and memory budget, and what each agent's events
 * said (readiness, sleeps, turns), with the views of an agent's container
 * the API answers from them.
 */
export abstract class RuntimeBooks extends RuntimeReads {
  protected readonly capacityManager: CapacityManager
  /** Readiness, sleeps and turns of each agent, from its events. */
  protected readonly tracker: RunTracker

  constructor(options: RuntimeServiceOptions) {
    super(options)
    this.capacityManager = new CapacityManager({
      bootConcurrency: options.capacity?.bootConcurrency ?? Number.POSITIVE_INFINITY,
      memoryBudgetMb: options.capacity?.memoryBudgetMb ?? Number.POSITIVE_INFINITY,
      order: options.capacity?.bootQueue,
      roomSleeps: options.capacity?.roomSleeps,
      // A sleep for room: a start waits on it, so it takes no warm-up turn.
      sleep: (agentId) => this.sleep(agentId, { warmUp: false }),
      log: (message, detail) => options.log?.('info', message, detail),
      book: options.capacityBook,
    })
    this.tracker = new RunTracker(this.capacityManager, this.plans)
  }

  /** Scale to zero (RuntimeService.sleep); the capacity manager makes room with it. */
  abstract sleep(agentId: string, options?: { warmUp?: boolean }): Promise<void>

  /** Takes the agent out of the boot queue; its waiting start fails with BootCancelledError. */
  cancelQueuedStart(agentId: string): void {
    if (this.capacityManager.isQueued(agentId)) this.capacityManager.release(agentId)
  }

  /**
   * A message for the agent: the capacity manager puts it to sleep last,
   * and a start of it waiting as background (a new agent not yet booted)
   * becomes interactive, keeping its place among its account's starts.
   */
  touch(agentId: string): void {
    this.capacityManager.touch(agentId)
    this.prioritize(agentId)
  }

  /**
   * Someone waits on the agent's start now (a message, its owner's start):
   * a start of it waiting as background, or scheduled and not yet queued,
   * is admitted as interactive.
   */
  prioritize(agentId: string): void {
    if (this.capacityManager.isQueued(agentId) || this.plans.scheduled(agentId) !== undefined) {
      this.capacityManager.prioritize(agentId)
    }
  }

  /** Its 1-based place in the boot queue while it waits there (`container: queued`), else null. */
  queuePosition(agentId: string): number | null {
    return this.capacityManager.queuePosition(agentId)
  }

  /** Agents whose containers run or boot here, least recently active first. */
  admittedAgents() {
    return this.capacityManager.admittedAgents()
  }

  /** Boot queue and memory budget as they stand (console, /stats): this instance's. */
  capacity(): CapacitySnapshot {
    return this.capacityManager.snapshot()
  }

  /** The same for the whole host (the instances sharing its capacity book). */
  hostCapacity(): Promise<CapacitySnapshot> {
    return this.capacityManager.hostSnapshot()
  }

  /** Where the agent's container stands, in the words of the API's `container` field. */
  async containerView(agentId: string): Promise<ContainerView> {
    if (this.capacityManager.isQueued(agentId)) return 'queued'
    const info = await this.driver.inspect(agentId)
    switch (info.state) {
      case 'running':
        return this.tracker.ready.has(agentId) ? 'running' : 'starting'
      case 'starting':
      case 'restarting':
        return 'starting'
      case 'error':
        return 'error'
      default:
        return 'stopped'
    }
  }

  /** Where its container stands, in one look: status, `container`, queue place, boot phase. */
  async snapshot(agentId: string): Promise<RuntimeSnapshot> {
    const [info, view] = await Promise.all([this.status(agentId), this.containerView(agentId)])
    const queuePosition = await this.capacityManager.hostQueuePosition(agentId)
    return { info, view, queuePosition, phase: knownPhase(agentId) }
  }
}
