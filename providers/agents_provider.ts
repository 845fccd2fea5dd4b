import type { ApplicationService } from '@adonisjs/core/types'

/**
 * Connects agents to their containers once the app is ready:
 * - runtime events become feed events and the `error` state;
 * - billing's `agents:limit_changed` stops paused agents' containers and
 *   starts resumed ones;
 * - at server start (not in tests unless AGENTS_RECOVER_ON_BOOT=true; never
 *   with AGENTS_RECOVER_ON_BOOT=false) the containers of `active` agents
 *   are adopted or started again, in the background; on a shared engine
 *   (docker, swarm) the holder of the reconcile lease does it, again
 *   every minute, and another instance takes over when it dies; with the
 *   process driver, the agents of an instance of this host that died are
 *   adopted by the instance that claims their leases;
 * - in the web server, agents idle for AGENT_IDLE_SLEEP_SECS are put to
 *   sleep (checked every 30 s).
 */
export default class AgentsProvider {
  #idleTimer?: NodeJS.Timeout
  #reconciler?: import('#runtime/services/engine_reconciler').EngineReconciler

  constructor(protected app: ApplicationService) {}

  #shouldRecover(): boolean {
    const setting = process.env.AGENTS_RECOVER_ON_BOOT
    if (setting === 'false') return false
    return setting === 'true' || this.app.getEnvironment() === 'web'
  }

  async ready() {
    const { agentLifecycle } = await import('#agents/services/agent_lifecycle')
    const logger = await this.app.container.make('logger')
    const runtime = await this.app.container.make('runtime')
    const emitter = await this.app.container.make('emitter')

    runtime.onEvent((event) => agentLifecycle.onRuntimeEvent(event))
    emitter.on('agents:limit_changed', (change) => agentLifecycle.applyLimitChange(change))

    if (this.app.getEnvironment() === 'web') {
      const { agentCapacityConfig } = await import('#config/agent_capacity')
      let checking = false
      this.#idleTimer = setInterval(() => {
        // A check that outlasts the interval (many workspaces to measure) is not doubled.
        if (checking) return
        checking = true
        agentLifecycle
          .sleepIdle(agentCapacityConfig.idleSleepMs)
          .then(() => agentLifecycle.sleepOverQuota())
          .catch((error) => logger.warn({ err: error }, 'agents: idle check failed'))
          .finally(() => (checking = false))
      }, agentCapacityConfig.idleCheckEveryMs)
      this.#idleTimer.unref()
    }

    if (this.#shouldRecover()) {
      const recover = () =>
        agentLifecycle.recover().then((result) =>
          logger.info(
            {
              adopted: result.adopted.length,
              started: result.started.length,
              failed: result.failed.length,
              swept: result.swept.length,
            },
            'agents: containers recovered'
          )
        )
      if (runtime.driver.name === 'process') {
        // Local processes: at boot each instance of the host recovers those no live one holds;
        // later, the agents of an instance that died are adopted by whoever claims them.
        recover().catch((error) => logger.error({ err: error }, 'agents: recovery failed'))
        const { PlacedRuntimeService } = await import('#runtime/placement/placed_runtime_service')
        if (runtime instanceof PlacedRuntimeService) {
          const { adoptOrphans } = await import('#agents/services/agent_adoption')
          runtime.placement.onOrphans(async (agentIds) =>
            adoptOrphans(agentLifecycle, runtime, agentIds)
          )
        }
      } else {
        // A shared engine: one instance at a time reconciles it (a lease in PostgreSQL).
        const { EngineReconciler } = await import('#runtime/services/engine_reconciler')
        this.#reconciler = new EngineReconciler({
          reconcile: recover,
          log: (message, detail) => logger.info(detail ?? {}, message),
        })
        this.#reconciler.start()
      }
    }
  }

  async shutdown() {
    clearInterval(this.#idleTimer)
    await this.#reconciler?.stop({ release: true }).catch(() => {})
    const { agentLifecycle } = await import('#agents/services/agent_lifecycle')
    // The agents stop first, within a bound (runtime.stopAgents: boots waiting
    // in the queue are cancelled, nothing launches any more, what runs is
    // stopped and leftovers killed), and here, not at the runtime's own
    // shutdown, so the feed events their stop causes are written while the
    // database is still open (written after it closed, they reopened a pool
    // that kept the stopped service alive for a minute).
    const runtime = await this.app.container.make('runtime')
    await runtime.stopAgents()
    // Container operations in flight (a reconfigure, a delete) end or fail (bounded).
    await Promise.race([
      agentLifecycle.settled(),
      new Promise((resolve) => setTimeout(resolve, 5_000).unref()),
    ])
    await Promise.race([
      agentLifecycle.eventsStored(),
      new Promise((resolve) => setTimeout(resolve, 3_000).unref()),
    ])
  }
}
