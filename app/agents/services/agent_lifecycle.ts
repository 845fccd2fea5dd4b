import app from '@adonisjs/core/services/app'
import logger from '@adonisjs/core/services/logger'
import { NotFoundException, ValidationException } from '#core/exceptions/api_exceptions'
import type { RuntimeService } from '#runtime/runtime_service'
import { BootCancelledError, type BootPriority } from '#runtime/capacity/capacity_manager'
import type { RuntimeEvent } from '#runtime/types'
import Agent from '#agents/models/agent'
import { recordFeedEvent } from '#agents/services/feed_service'
import { changeStatus, RuntimeEventFeed } from '#agents/services/runtime_event_feed'
import { containerField, type ContainerField } from '#agents/services/container_field'
import { sleepAgentsOverQuota, sleepIdleAgents } from '#agents/services/idle_sleep'
import { runtimeSpecFor } from '#agents/services/runtime_spec'

export interface StartResult {
  status: 'started'
  containerId: string
}
export interface StopResult {
  status: 'stopped'
}
export interface RestartResult {
  status: 'restarted'
  containerId: string
}

const PAUSED_MESSAGE =
  'The agent is paused because your plan allows fewer agents. Renew your plan or add an agent pack and it resumes automatically.'

/**
 * Turns agent states into container states and back. Every container
 * operation of one agent runs after the previous one finished (a PATCH's
 * reconfigure, a stop and a delete arriving together never interleave).
 * Container ids and readiness come from the runtime; feed events come from
 * the runtime's events (`handleRuntimeEvent`), so every path that starts or
 * stops a container is reported once.
 */
export class AgentLifecycle {
  readonly #chains = new Map<string, Promise<unknown>>()
  readonly #background = new Set<Promise<unknown>>()
  /** Runtime events -> feed events and the `error` state (runtime_event_feed.ts). */
  readonly #feed = new RuntimeEventFeed()

  constructor(private readonly runtime: () => Promise<RuntimeService>) {}

  /**
   * Runs `task` after the agent's previous container operation; it settles
   * once the feed events its container changes caused are stored too (so a
   * stop's answer comes after its `Agent stopped` event).
   */
  #serial<T>(agentId: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#chains.get(agentId) ?? Promise.resolve()
    const next = previous
      .catch(() => {})
      .then(task)
      .finally(() => this.#feed.storedFor(agentId))
    this.#chains.set(agentId, next)
    const forget = () => {
      if (this.#chains.get(agentId) === next) this.#chains.delete(agentId)
    }
    next.then(forget, forget)
    return next
  }

  /** Runs a task without making the caller wait; failures are logged. */
  #detached(what: string, agentId: string, task: () => Promise<unknown>) {
    const running = task().catch((error) => {
      // A start overtaken by a stop or restart: nothing went wrong.
      if (error instanceof BootCancelledError) return
      logger.warn({ agentId, err: error }, `agents: ${what} failed`)
    })
    this.#background.add(running)
    running.finally(() => this.#background.delete(running))
  }

  /** Resolves when the background work started so far has finished (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.#background.size > 0) await Promise.allSettled([...this.#background])
  }

  /** Every feed write that runtime events started so far has finished. */
  eventsStored = (): Promise<void> => this.#feed.stored()

  /** The runtime's event listener (subscribed at boot by the agents provider). */
  onRuntimeEvent(event: RuntimeEvent): void {
    this.#feed.onRuntimeEvent(event)
  }

  /** Runs `task` in the agent's order of operations; the caller does not wait (failures logged). */
  inOrder(what: string, agentId: string, task: () => Promise<unknown>): void {
    this.#detached(what, agentId, () => this.#serial(agentId, task))
  }

  async #fresh(agentId: string): Promise<Agent> {
    const agent = await Agent.find(agentId)
    if (!agent) throw new NotFoundException('Agent not found')
    return agent
  }

  /**
   * Boots the run `runId` (planned by the runtime) of an agent that is to
   * be active, unless it was stopped or another run was planned meanwhile.
   * In the agent's order of operations (inOrder).
   */
  async startRun(
    agentId: string,
    runId: string,
    options: { restart?: boolean; priority?: BootPriority; askedAt?: number } = {}
  ) {
    const agent = await Agent.find(agentId)
    if (!agent || agent.status !== 'active') return
    const runtime = await this.runtime()
    try {
      const spec = runtimeSpecFor(agent)
      const start = { runId, priority: options.priority, askedAt: options.askedAt }
      return options.restart
        ? await runtime.restart(spec, start)
        : await runtime.ensureStarted(spec, start)
    } catch (error) {
      // Stopped or restarted while it waited: not a failure of the agent.
      if (error instanceof BootCancelledError) throw error
      // The runtime reports the reason as an `error` event (feed); the state is ours.
      await changeStatus(agentId, 'error', 'Agent failed to start', { from: ['active'] })
      throw error
    }
  }

  /** Sets `active` (one feed event when it was not) and boots `runId` in the background. */
  async #schedule(agent: Agent, runId: string, options: { restart?: boolean } = {}) {
    await changeStatus(agent.id, 'active', options.restart ? 'Agent restarted' : 'Agent started')
    this.inOrder(options.restart ? 'restart' : 'start', agent.id, () =>
      this.startRun(agent.id, runId, options)
    )
  }

  /**
   * POST start: answers at once with the container id of the run it
   * scheduled (the live one when it runs already); the container boots,
   * waits in the boot queue (`container: queued`) or wakes afterwards.
   */
  async start(agent: Agent): Promise<StartResult> {
    const fresh = await this.#fresh(agent.id)
    if (fresh.status === 'paused') throw new ValidationException(PAUSED_MESSAGE)
    const runtime = await this.runtime()
    // Over its workspace quota the agent stays as it is (asleep: the hosted path answers).
    await runtime.assertWorkspaceStartable(fresh.id)
    const containerId = await runtime.planRun(fresh.id)
    // Its owner waits on it: a pre-boot still waiting as background goes ahead now.
    runtime.prioritize(fresh.id)
    await this.#schedule(fresh, containerId)
    return { status: 'started', containerId }
  }

  /**
   * A message (chat, stream, WebSocket, webhook, schedule, channel) for an
   * agent: marks it active for the capacity manager and, when it is asleep,
   * wakes it in the background. The message itself is answered on the
   * hosted path meanwhile (the chat area), so nobody waits for a boot.
   */
  async wake(agent: Agent): Promise<ContainerField | null> {
    if (agent.status !== 'active') return containerField(agent, 'stopped')
    const runtime = await this.runtime()
    runtime.touch(agent.id)
    // Only an agent that was put to sleep wakes on a message; one whose
    // start failed or never happened keeps its state (its owner starts it).
    // Most messages stop here, with no container lookup on the hot path.
    if (!agent.sleepingSince) return null
    const view = await runtime.containerView(agent.id)
    if (view === 'stopped' && !this.#chains.has(agent.id)) {
      this.#detached('wake', agent.id, () =>
        this.#serial(agent.id, async () => {
          const fresh = await Agent.find(agent.id)
          if (!fresh || fresh.status !== 'active') return
          if ((await runtime.containerView(agent.id)) !== 'stopped') return
          // Over its workspace quota it stays asleep (the hosted path answers).
          if (await runtime.workspaceOverQuota(agent.id)) return
          await this.startRun(agent.id, await runtime.planRun(agent.id))
        })
      )
      return 'sleeping'
    }
    return containerField(agent, view)
  }

  /**
   * Runs `work` (a backup's copy, a restore) while nothing of the agent
   * changes, in its order of operations. With `freeze`, a running container
   * is frozen for it where the runtime can (`work` is told `frozen`); else
   * one that runs or boots is put to sleep (checkpointed where the host can)
   * or, with `fresh`, stopped (a restore: the caller discards the checkpoint)
   * and started again in the background after; one asleep stays so.
   */
  async withAgentQuiet<T>(
    agentId: string,
    work: (how: 'frozen' | 'down') => Promise<T>,
    options: { fresh?: boolean; freeze?: boolean } = {}
  ): Promise<T> {
    const runtime = await this.runtime()
    let wasUp = false
    try {
      return await this.#serial(agentId, async () => {
        const view = await runtime.containerView(agentId)
        if (options.freeze && view === 'running') {
          const frozen = await runtime.whileFrozen(agentId, () => work('frozen'))
          if (frozen) return frozen.value
        }
        wasUp = view !== 'stopped'
        if (wasUp && options.fresh) await runtime.stop(agentId)
        else if (wasUp) await runtime.sleep(agentId, { warmUp: false })
        return work('down')
      })
    } finally {
      if (wasUp) {
        this.inOrder('start after a backup', agentId, async () =>
          this.startRun(agentId, await runtime.planRun(agentId))
        )
      }
    }
  }

  /** Puts one agent to sleep (idle): its container stops, its status stays `active`. */
  sleep(agentId: string): Promise<void> {
    return this.#serial(agentId, async () => {
      const runtime = await this.runtime()
      await runtime.sleep(agentId)
    })
  }

  /** Puts to sleep the agents running here idle for `idleMs` (idle_sleep.ts); their ids. */
  async sleepIdle(idleMs: number, now = Date.now()): Promise<string[]> {
    return sleepIdleAgents(await this.runtime(), (agentId) => this.sleep(agentId), idleMs, now)
  }

  /** Puts to sleep the agents running here over their workspace quota (idle_sleep.ts); their ids. */
  async sleepOverQuota(): Promise<string[]> {
    return sleepAgentsOverQuota(await this.runtime(), (agentId) => this.sleep(agentId))
  }

  /**
   * A new agent: its container is booted ahead as a background start (docs/runtime.md "Boot
   * queue order"): at once on an idle host, after every start someone waits on otherwise, never
   * by putting another agent to sleep; a message or its owner's start makes it interactive. The
   * request does not wait; the agent's next operation (an import's write) comes after it.
   */
  startInBackground(agent: Agent): void {
    const askedAt = Date.now() // its place among waiting starts: creates queue in their order
    this.#detached('start', agent.id, () =>
      this.#serial(agent.id, async () => {
        const runId = await this.runtime().then((runtime) => runtime.planRun(agent.id))
        return this.startRun(agent.id, runId, { priority: 'background', askedAt })
      })
    )
  }

  /**
   * POST stop: answers at once with the status stored; the container stops
   * in the background (a boot waiting in the queue or not yet launched is
   * cancelled, a running one stopped). Config and data stay; a paused agent
   * stays paused. Should the service die first, the boot sweep stops what
   * a stopped agent left running.
   */
  async stop(agent: Agent): Promise<StopResult> {
    const runtime = await this.runtime()
    runtime.cancelRun(agent.id)
    await changeStatus(agent.id, 'stopped', 'Agent stopped', { from: ['active', 'error'] })
    this.#detached('stop', agent.id, () => this.#serial(agent.id, () => runtime.stop(agent.id)))
    return { status: 'stopped' }
  }

  /**
   * POST restart: answers at once with the new run's container id; the
   * container stops and boots with a freshly rendered config in the
   * background. Restarting a booting or queued agent boots it once: the
   * earlier run, no longer wanted, boots nothing.
   */
  async restart(agent: Agent): Promise<RestartResult> {
    const fresh = await this.#fresh(agent.id)
    if (fresh.status === 'paused') throw new ValidationException(PAUSED_MESSAGE)
    const runtime = await this.runtime()
    runtime.cancelRun(fresh.id)
    const containerId = await runtime.planRun(fresh.id, { fresh: true })
    await this.#schedule(fresh, containerId, { restart: true })
    return { status: 'restarted', containerId }
  }

  /** After a config change: a running container restarts with the new config (background). */
  reconfigureInBackground(agent: Agent): void {
    this.#detached('reconfigure', agent.id, () =>
      this.#serial(agent.id, async () => {
        const fresh = await Agent.find(agent.id)
        if (!fresh || fresh.status !== 'active') return
        const runtime = await this.runtime()
        await runtime.reconfigure(runtimeSpecFor(fresh))
      })
    )
  }

  /** DELETE, after the row is gone: the container and its data go without making the caller wait. */
  removeInBackground(agentId: string): void {
    this.#detached('remove', agentId, async () => {
      const runtime = await this.runtime()
      runtime.cancelRun(agentId)
      this.#feed.forget(agentId)
      await this.remove(agentId)
    })
  }

  /** DELETE: stops the container and deletes its data. Failures are logged (the boot sweep retries). */
  remove(agentId: string): Promise<void> {
    return this.#serial(agentId, async () => {
      try {
        const runtime = await this.runtime()
        await runtime.remove(agentId)
      } catch (error) {
        logger.warn({ agentId, err: error }, 'agents: removing the container failed')
      }
    })
  }

  /**
   * The owner's agent limit shrank or grew (billing's `agents:limit_changed`;
   * statuses are already stored): stop the containers of paused agents and
   * start those of resumed ones, in the background. A resumed agent whose
   * container was never created (a row made without this service) is only
   * marked active; it starts on its owner's next start.
   */
  applyLimitChange(change: { paused: string[]; resumed: string[] }): void {
    for (const agentId of change.paused) {
      this.#detached('pause', agentId, () =>
        this.#serial(agentId, async () => {
          await recordFeedEvent(agentId, {
            type: 'status_change',
            content: 'Agent paused: the plan allows fewer agents',
            transition: { from: 'active', to: 'paused' },
          })
          const runtime = await this.runtime()
          runtime.cancelRun(agentId)
          await runtime.stop(agentId)
        })
      )
    }
    for (const agentId of change.resumed) {
      this.#detached('resume', agentId, () =>
        this.#serial(agentId, async () => {
          const agent = await Agent.find(agentId)
          if (!agent || agent.status !== 'active') return
          await recordFeedEvent(agentId, {
            type: 'status_change',
            content: 'Agent resumed: the plan allows it again',
            transition: { from: 'paused', to: 'active' },
          })
          const runtime = await this.runtime()
          const container = await runtime.status(agentId)
          if (container.state === 'absent') return
          await runtime.ensureStarted(runtimeSpecFor(agent), { priority: 'background' })
        })
      )
    }
  }

  /**
   * Service boot: adopt or start the containers of every `active` agent and
   * stop containers of agents that no longer exist (runtime.recover).
   */
  async recover(options: { sweep?: boolean; agentIds?: string[] } = {}) {
    // Sleeping agents stay asleep: a message wakes them (no boot storm at start).
    const query = Agent.query()
      .where('status', 'active')
      .whereNull('sleeping_since')
      .orderBy('created_at', 'asc')
    // Tests recover their own agents only (the sweep must then be off).
    if (options.agentIds) query.whereIn('id', options.agentIds)
    const agents = await query
    const specs = []
    for (const agent of agents) {
      try {
        specs.push(runtimeSpecFor(agent))
      } catch (error) {
        logger.error({ agentId: agent.id, err: error }, 'agents: cannot build the runtime spec')
      }
    }
    const runtime = await this.runtime()
    const sweep = options.agentIds ? false : options.sweep
    const result = await runtime.recover(specs, {
      sweep,
      // In the agent's own order: a stop or DELETE that arrives during recovery wins.
      each: (agentId, start) =>
        this.#serial(agentId, async () => {
          const fresh = await Agent.find(agentId)
          if (fresh?.status === 'active' && !fresh.sleepingSince) await start()
        }),
    })
    for (const failure of result.failed) {
      await changeStatus(failure.agentId, 'error', 'Agent failed to start', { from: ['active'] })
    }
    return result
  }
}

/** The service's one lifecycle (per-agent ordering is per process). */
export const agentLifecycle = new AgentLifecycle(() => app.container.make('runtime'))
