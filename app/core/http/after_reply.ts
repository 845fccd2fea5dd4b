/**
 * Writes an answer does not wait for (docs/chat.md "After the answer"). A
 * chat's exchange store and its credit settlement are already sent to the
 * database when the answer goes out; they finish right after it. Until they
 * do, whatever could read them on this instance waits for them:
 * - the account's next authenticated request (its balance, ledger, history,
 *   analytics), except the turn routes themselves, which wait where they
 *   read (below);
 * - the agent's next turn, before it reads the stored history for context;
 * - a credit hold the balance could not cover (the pending settlement may
 *   give back the rest of a hold);
 * - the service's shutdown.
 * Keys: `accountKey(id)`, `agentKey(id)`.
 */
class AfterReply {
  #pending = new Map<string, Set<Promise<void>>>()

  /** Tracks `work` under each key until it ends; a failure goes to `onError`, never to a waiter. */
  track(keys: string[], work: Promise<unknown>, onError: (error: unknown) => void): void {
    const done: Promise<void> = work.then(
      () => this.#forget(keys, done),
      (error) => {
        this.#forget(keys, done)
        onError(error)
      }
    )
    for (const key of keys) {
      let set = this.#pending.get(key)
      if (!set) this.#pending.set(key, (set = new Set()))
      set.add(done)
    }
  }

  /** The writes pending under `key`, or undefined when there are none (no await needed). */
  pending(key: string): Promise<void> | undefined {
    const set = this.#pending.get(key)
    return set ? Promise.all(set).then(() => {}) : undefined
  }

  /** Every pending write (the service's shutdown). */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) {
      await Promise.all([...this.#pending.values()].flatMap((set) => [...set]))
    }
  }

  #forget(keys: string[], done: Promise<void>) {
    for (const key of keys) {
      const set = this.#pending.get(key)
      set?.delete(done)
      if (set?.size === 0) this.#pending.delete(key)
    }
  }
}

export const afterReply = new AfterReply()

export const accountKey = (userId: string) => `account:${userId}`
export const agentKey = (agentId: string) => `agent:${agentId}`
