import PQueue from 'p-queue'
import type { HibernateRun } from '#runtime/process/agent_process'

/**
 * The second half of the host's sleeps, one at a time: a sleep's dump ends
 * the agent's processes (its memory is free then), and storing that dump as
 * its checkpoint (a delta on its template, compressed) follows here while
 * the next sleep may already dump. A pipeline two deep: a dump waits while
 * one store runs and another waits, so raw dumps never pile up on disk and
 * two stores never share the two cores with the restores beside them
 * (docs/runtime.md "Sleep and wake"). p-queue: the maintained queue the
 * service already uses for its password hashes. `AGENT_SLEEP_PIPELINE=off`
 * (bench:density's baseline): a sleep frees its memory only once stored.
 */
export class CheckpointStores {
  readonly pipelined = process.env.AGENT_SLEEP_PIPELINE !== 'off'
  readonly #queue = new PQueue({ concurrency: 1 })
  /** Agents whose dump is being stored (a start of theirs resumes it). */
  readonly #storing = new Set<string>()

  /**
   * Puts an agent to sleep through `hibernate` (AgentProcess.hibernate) in
   * the pipeline: the dump waits its turn, `ended` is heard once the
   * processes have ended, the store follows in its turn. Without the
   * pipeline, `ended` is heard once stored. True when it slept.
   */
  async sleep(
    agentId: string,
    hibernate: (run: HibernateRun) => Promise<boolean>,
    ended: () => Promise<void>
  ): Promise<boolean> {
    if (!this.pipelined) {
      const slept = await hibernate({})
      if (slept) await ended()
      return slept
    }
    // Until at most one store runs and none waits.
    await this.#queue.onSizeLessThan(1)
    try {
      return await hibernate({
        ended: async () => {
          this.#storing.add(agentId)
          await ended()
        },
        store: (work) => this.#queue.add(work),
      })
    } finally {
      this.#storing.delete(agentId)
    }
  }

  /** True from its processes' end until its checkpoint is stored: a start of it resumes that. */
  storing(agentId: string): boolean {
    return this.#storing.has(agentId)
  }
}
