import app from '@adonisjs/core/services/app'
import logger from '@adonisjs/core/services/logger'
import { NotFoundException, ValidationException } from '#core/exceptions/api_exceptions'
import type { ContainerView, RuntimeService } from '#runtime/runtime_service'
import { BootCancelledError } from '#runtime/capacity/capacity_manager'
import type { RuntimeEvent } from '#runtime/types'
import Agent, { type AgentStatus } from '#agents/models/agent'
import { recordFeedEvent } from '#agents/services/feed_service'
import { runtimeSpecFor } from '#agents/services/runtime_spec'

export interface StartResult {
  status: 'started'
  containerId: string | null
}
export interface StopResult {
  status: 'stopped'
}
export interface RestartResult {
  status: 'restarted'
  containerId: string | null
}

const PAUSED_MESSAGE =
  'The agent is paused because your plan allows fewer agents. Renew your plan or add an agent pack and it resumes automatically.'

async function setStatus(agentId: string, status: AgentStatus): Promise<void> {
  await Agent.query().where('id', agentId).update({ status, updatedAt: new Date() })
}

/** How long POST start waits for a boot slot before answering (the start goes on queued). */
const START_ANSWER_WITHIN_MS = 2_000

/** The API's `container` field (CONTRACT.md): the runtime's view plus `sleeping`. */
export type ContainerField = ContainerView | 'sleeping'

export function containerField(
  agent: Pick<Agent, 'status' | 'sleepingSince'>,
  view: ContainerView
): ContainerField {
  if (agent.status === 'stopped' || agent.status === 'paused') return 'stopped'
  if (agent.status === 'error') return 'error'
  if (view !== 'stopped') return view
  // Active with no container: put to sleep, or on its way up (created, woken, recovering).
  return agent.sleepingSince ? 'sleeping' : 'starting'
}

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
  /** Feed and status writes of runtime events, per agent, until they are stored. */
  readonly #eventWrites = new Map<string, Set<Promise<void>>>()

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
      .finally(() => this.#eventsStored(agentId))
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
  async eventsStored(): Promise<void> {
    await Promise.allSettled([...this.#eventWrites.values()].flatMap((writes) => [...writes]))
  }

  async #fresh(agentId: string): Promise<Agent> {
    const agent = await Agent.find(agentId)
    if (!agent) throw new NotFoundException('Agent not found')
    return agent
  }

  async #start(agentId: string) {
    const agent = await this.#fresh(agentId)
    if (agent.status === 'paused') throw new ValidationException(PAUSED_MESSAGE)
    const runtime = await this.runtime()
    // Over its workspace quota the agent stays as it is (asleep: the hosted path answers).
    await runtime.assertWorkspaceStartable(agent.id)
    if (agent.status !== 'active') await setStatus(agent.id, 'active')
    try {
      return await runtime.ensureStarted(runtimeSpecFor(agent))
    } catch (error) {
      // Stopped while it waited in the boot queue: not a failure of the agent.
      if (error instanceof BootCancelledError) throw error
      // The runtime reports the reason as an `error` event (feed); the state is ours.
      await setStatus(agent.id, 'error')
      throw error
    }
  }

  /**
   * POST start: the container runs, boots or waits in the boot queue
   * afterwards (status shows `container: queued`); not waiting for
   * readiness, nor for a boot slot longer than a moment.
   */
  async start(agent: Agent): Promise<StartResult> {
    const starting = this.#serial(agent.id, () => this.#start(agent.id))
    this.#detached('start', agent.id, () => starting)
    const info = await Promise.race([
      starting,
      new Promise<null>((resolve) => setTimeout(resolve, START_ANSWER_WITHIN_MS, null).unref()),
    ])
    return { status: 'started', containerId: info?.containerId ?? null }
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
          await this.#start(agent.id)
        })
      )
      return 'sleeping'
    }
    return containerField(agent, view)
  }

  /** Puts one agent to sleep (idle): its container stops, its status stays `active`. */
  sleep(agentId: string): Promise<void> {
    return this.#serial(agentId, async () => {
      const runtime = await this.runtime()
      await runtime.sleep(agentId)
    })
  }

  /**
   * Puts to sleep every agent running here whose last message (stored
   * `last_active_at`, or this process's own record of it) and whose start
   * are older than `idleMs`. Returns the ids put to sleep.
   */
  async sleepIdle(idleMs: number, now = Date.now()): Promise<string[]> {
    const runtime = await this.runtime()
    const candidates = runtime
      .admittedAgents()
      .filter((entry) => !entry.booting && entry.lastActiveAt < now - idleMs)
    if (candidates.length === 0) return []
    const rows = await Agent.query()
      .whereIn(
        'id',
        candidates.map((entry) => entry.agentId)
      )
      .select('id', 'last_active_at')
    const lastMessage = new Map(rows.map((row) => [row.id, row.lastActiveAt?.toMillis() ?? 0]))
    const idle = candidates
      .filter((entry) => (lastMessage.get(entry.agentId) ?? 0) < now - idleMs)
      .map((entry) => entry.agentId)
    await Promise.allSettled(idle.map((agentId) => this.sleep(agentId)))
    return idle
  }

  /**
   * Puts to sleep every agent running here whose own writes took its
   * workspace past the quota; it stays asleep (messages answered on the
   * hosted path, files manageable) until enough is deleted. Returns the ids.
   */
  async sleepOverQuota(): Promise<string[]> {
    const runtime = await this.runtime()
    const over: string[] = []
    for (const entry of runtime.admittedAgents()) {
      if (!entry.booting && (await runtime.workspaceOverQuota(entry.agentId))) {
        over.push(entry.agentId)
      }
    }
    await Promise.allSettled(
      over.map(async (agentId) => {
        await this.sleep(agentId)
        await recordFeedEvent(agentId, {
          type: 'error',
          content:
            'Workspace over its quota: the agent was put to sleep and stays asleep ' +
            'until files are deleted through the file manager',
        })
      })
    )
    return over
  }

  /** A new agent: starts its container without making the request wait. */
  startInBackground(agent: Agent): void {
    this.#detached('start', agent.id, () => this.#serial(agent.id, () => this.#start(agent.id)))
  }

  /** POST stop: the container stops, config and data stay. A paused agent stays paused. */
  async stop(agent: Agent): Promise<StopResult> {
    // A start waiting in the boot queue is cancelled, not waited for.
    const runtime = await this.runtime()
    runtime.cancelQueuedStart(agent.id)
    return this.#serial(agent.id, async () => {
      const fresh = await this.#fresh(agent.id)
      await runtime.stop(fresh.id)
      if (fresh.status !== 'paused') await setStatus(fresh.id, 'stopped')
      return { status: 'stopped' }
    })
  }

  /** POST restart: stop then start with a freshly rendered config; a new container id. */
  restart(agent: Agent): Promise<RestartResult> {
    return this.#serial(agent.id, async () => {
      const fresh = await this.#fresh(agent.id)
      if (fresh.status === 'paused') throw new ValidationException(PAUSED_MESSAGE)
      if (fresh.status !== 'active') await setStatus(fresh.id, 'active')
      try {
        const runtime = await this.runtime()
        const info = await runtime.restart(runtimeSpecFor(fresh))
        return { status: 'restarted', containerId: info.containerId }
      } catch (error) {
        await setStatus(fresh.id, 'error')
        throw error
      }
    })
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
      runtime.cancelQueuedStart(agentId)
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
          })
          const runtime = await this.runtime()
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
          })
          const runtime = await this.runtime()
          const container = await runtime.status(agentId)
          if (container.state === 'absent') return
          await runtime.ensureStarted(runtimeSpecFor(agent))
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
    const result = await runtime.recover(specs, { sweep })
    for (const failure of result.failed) await setStatus(failure.agentId, 'error')
    return result
  }

  async #eventsStored(agentId: string): Promise<void> {
    const writes = this.#eventWrites.get(agentId)
    if (writes) await Promise.allSettled([...writes])
  }

  /** The runtime's event listener (subscribed at boot by the agents provider). */
  onRuntimeEvent(event: RuntimeEvent): void {
    const write = this.handleRuntimeEvent(event).catch((error) => {
      logger.error({ err: error, agentId: event.agentId }, 'agents: runtime event not recorded')
    })
    let writes = this.#eventWrites.get(event.agentId)
    if (!writes) this.#eventWrites.set(event.agentId, (writes = new Set()))
    writes.add(write)
    write.finally(() => {
      writes.delete(write)
      if (writes.size === 0 && this.#eventWrites.get(event.agentId) === writes) {
        this.#eventWrites.delete(event.agentId)
      }
    })
  }

  /** Runtime events -> feed events and the `error` state. */
  async handleRuntimeEvent(event: RuntimeEvent): Promise<void> {
    switch (event.type) {
      case 'started':
        await Agent.query()
          .where('id', event.agentId)
          .whereNotNull('sleeping_since')
          .update({ sleepingSince: null })
        return recordFeedEvent(event.agentId, {
          type: 'status_change',
          content: 'Agent started',
        })
      case 'sleeping':
        await Agent.query().where('id', event.agentId).update({ sleepingSince: new Date() })
        return recordFeedEvent(event.agentId, {
          type: 'status_change',
          content: 'Agent asleep: its container stopped while idle; the next message wakes it',
        })
      case 'stopped':
        return recordFeedEvent(event.agentId, {
          type: 'status_change',
          content: 'Agent stopped',
        })
      case 'exited':
        return recordFeedEvent(event.agentId, {
          type: 'error',
          content: `Agent process ended unexpectedly: ${event.reason}`,
        })
      case 'restarting':
        return recordFeedEvent(event.agentId, {
          type: 'status_change',
          content: `Agent restarting after a crash (restart ${event.restartCount}, in ${Math.round(event.delayMs / 100) / 10}s)`,
        })
      case 'error':
        // Given up on by the runtime; a paused agent keeps its pause.
        await Agent.query()
          .where('id', event.agentId)
          .whereNot('status', 'paused')
          .update({ status: 'error', updatedAt: new Date() })
        return recordFeedEvent(event.agentId, {
          type: 'error',
          content: `Agent failed: ${event.message}`,
        })
      case 'ready':
        return
    }
  }
}

/** The service's one lifecycle (per-agent ordering is per process). */
export const agentLifecycle = new AgentLifecycle(() => app.container.make('runtime'))
