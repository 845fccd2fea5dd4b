import type { CapacityManager } from '#runtime/capacity/capacity_manager'
import type { RunPlans } from '#runtime/run_plans'
import type { RuntimeEvent } from '#runtime/types'

/**
 * What the runtime service keeps per agent from its containers' events:
 * whether its framework answered since its start, whether it is being put
 * to sleep, whether it has had a turn since it booted; and the capacity
 * books (boot slots, memory) and scheduled runs in step with them.
 */
export class RunTracker {
  /** Agents whose framework answered its readiness path since their last start. */
  readonly ready = new Set<string>()
  /** Agents being put to sleep: their `stopped` event is reported as `sleeping`. */
  readonly sleeping = new Set<string>()
  /**
   * Agents whose running framework has been sent a turn since it booted or started from its
   * template (a restore keeps it): a warm-up is then needless, and a sleep keeps the run.
   */
  readonly hadTurn = new Set<string>()

  constructor(
    private readonly capacity: CapacityManager,
    private readonly plans: RunPlans
  ) {}

  /** Keeps the capacity books and readiness in step with what containers do. */
  track(event: RuntimeEvent): RuntimeEvent {
    switch (event.type) {
      case 'ready':
        this.ready.add(event.agentId)
        this.capacity.booted(event.agentId)
        break
      case 'started':
        // The scheduled run is up under its id: the driver reports it from now on.
        this.plans.settled(event.agentId, event.containerId)
        this.ready.delete(event.agentId)
        // A boot starts cold; a restore goes on from the checkpointed run.
        if (!event.restored) this.hadTurn.delete(event.agentId)
        break
      case 'exited':
      case 'restarting':
        this.ready.delete(event.agentId)
        break
      case 'error':
        this.ready.delete(event.agentId)
        this.capacity.booted(event.agentId)
        this.capacity.release(event.agentId)
        break
      case 'stopped':
        this.ready.delete(event.agentId)
        this.capacity.booted(event.agentId)
        this.capacity.release(event.agentId)
        if (this.sleeping.delete(event.agentId)) {
          return { type: 'sleeping', agentId: event.agentId, at: event.at }
        }
        break
    }
    return event
  }
}
