/**
 * One operation per agent at a time (a boot-time adopt and a user's start
 * may race): each agent's operations run one after the other, whatever the
 * previous one's outcome.
 */
export class AgentLocks {
  readonly #locks = new Map<string, Promise<unknown>>()

  /** Runs one operation per agent at a time (a boot-time adopt and a user's start may race). */
  exclusive<T>(agentId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(agentId) ?? Promise.resolve()
    const next = previous.catch(() => undefined).then(work)
    this.#locks.set(agentId, next)
    void next
      .finally(() => {
        if (this.#locks.get(agentId) === next) this.#locks.delete(agentId)
      })
      .catch(() => undefined)
    return next
  }

  /** True while an operation of the agent runs or waits. */
  busy(agentId: string): boolean {
    return this.#locks.has(agentId)
  }

  /** The operations under way now (a shutdown waits a little for them). */
  pending(): Array<Promise<unknown>> {
    return [...this.#locks.values()]
  }
}
