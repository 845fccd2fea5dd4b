import logger from '@adonisjs/core/services/logger'
import type { RuntimeEvent } from '#runtime/types'
import Agent, { type AgentStatus } from '#agents/models/agent'
import { recordFeedEvent, type Transition } from '#agents/services/feed_service'
import type { ContainerField } from '#agents/services/container_field'

/**
 * Sets the stored status (only from one of `from`, when given) and, when it
 * changed, stores one `status_change` event naming the transition. Returns
 * the status it changed from, or null when it did not change.
 */
export async function changeStatus(
  agentId: string,
  to: AgentStatus,
  content: string,
  options: { from?: AgentStatus[] } = {}
): Promise<AgentStatus | null> {
  const row = await Agent.query().where('id', agentId).select('status').first()
  if (!row || row.status === to) return null
  if (options.from && !options.from.includes(row.status)) return null
  // Compare-and-set: of two changes racing, one stores the event.
  const updated = await Agent.query()
    .where('id', agentId)
    .where('status', row.status)
    .update({ status: to, updatedAt: new Date() })
  const count = Number(Array.isArray(updated) ? updated[0] : updated)
  if (!count) return null
  await recordFeedEvent(agentId, {
    type: 'status_change',
    content,
    transition: { from: row.status, to },
  })
  return row.status
}

/**
 * The runtime's events become the agent's feed events and its `error`
 * state: one `status_change` per container transition, whatever path
 * started or stopped the container. Writes run in the background; the
 * lifecycle waits for an agent's (`storedFor`) before an operation answers.
 */
export class RuntimeEventFeed {
  /** Feed and status writes of runtime events, per agent, until they are stored. */
  readonly #eventWrites = new Map<string, Set<Promise<void>>>()
  /** The container state each agent's feed last reported (one event per transition). */
  readonly #containerSeen = new Map<string, ContainerField>()

  /** A deleted agent: its last reported state is forgotten. */
  forget(agentId: string): void {
    this.#containerSeen.delete(agentId)
  }

  /** Every write that runtime events started so far has finished. */
  async stored(): Promise<void> {
    await Promise.allSettled([...this.#eventWrites.values()].flatMap((writes) => [...writes]))
  }

  /** Every write runtime events of `agentId` started so far has finished. */
  async storedFor(agentId: string): Promise<void> {
    const writes = this.#eventWrites.get(agentId)
    if (writes) await Promise.allSettled([...writes])
  }

  /** Records `event` in the background; `stored` / `storedFor` wait for it. */
  onRuntimeEvent(event: RuntimeEvent): void {
    const write = this.handle(event).catch((error) => {
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

  /**
   * One `status_change` event when the container's state (as the feed last
   * reported it) changes; repeated reports of one state add nothing.
   */
  async #containerChange(agentId: string, to: ContainerField, content: string): Promise<void> {
    const from = this.#containerSeen.get(agentId) ?? null
    if (from === to) return
    this.#containerSeen.set(agentId, to)
    const transition: Transition = { from, to }
    await recordFeedEvent(agentId, { type: 'status_change', content, transition })
  }

  /** Runtime events -> feed events and the `error` state. */
  async handle(event: RuntimeEvent): Promise<void> {
    switch (event.type) {
      case 'started':
        await Agent.query()
          .where('id', event.agentId)
          .whereNotNull('sleeping_since')
          .update({ sleepingSince: null })
        return this.#containerChange(
          event.agentId,
          'starting',
          event.restored ? 'Container restored from its checkpoint' : 'Container launched'
        )
      case 'ready':
        return this.#containerChange(event.agentId, 'running', 'Container running')
      case 'sleeping':
        await Agent.query().where('id', event.agentId).update({ sleepingSince: new Date() })
        return this.#containerChange(
          event.agentId,
          'sleeping',
          'Agent asleep: its container stopped while idle; the next message wakes it'
        )
      case 'stopped':
        return this.#containerChange(event.agentId, 'stopped', 'Container stopped')
      case 'exited':
        return recordFeedEvent(event.agentId, {
          type: 'error',
          content: `Agent process ended unexpectedly: ${event.reason}`,
        })
      case 'restarting':
        return this.#containerChange(
          event.agentId,
          'starting',
          `Agent restarting after a crash (restart ${event.restartCount}, in ${Math.round(event.delayMs / 100) / 10}s)`
        )
      case 'error':
        this.#containerSeen.set(event.agentId, 'error')
        // Given up on by the runtime; a paused or stopped agent keeps its state.
        await changeStatus(event.agentId, 'error', 'Agent failed', { from: ['active'] })
        return recordFeedEvent(event.agentId, {
          type: 'error',
          content: `Agent failed: ${event.message}`,
        })
    }
  }
}
