import { setTimeout as sleep } from 'node:timers/promises'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import type { HostPlacement } from '#runtime/placement/host_placement'
import { PeerMovedError, PeerUnreachableError } from '#runtime/placement/peer_link'

/** Attempts at an operation whose holder moved or died meanwhile. */
const ATTEMPTS = 4

/**
 * Where each runtime operation on an agent runs (placed_runtime_service.ts):
 * here when this instance holds the agent, else on the instance that does,
 * over the peer link; and, on the holder's side, the operations asked by
 * peers. Counts the operations running here per agent (a lease in use is
 * never given up as idle).
 */
export class AgentRouting {
  readonly #busy = new Map<string, number>()

  constructor(private readonly placement: HostPlacement) {}

  /** True while an operation on the agent runs here. */
  busy(agentId: string): boolean {
    return (this.#busy.get(agentId) ?? 0) > 0
  }

  /**
   * Runs `local` here when this instance holds the agent (or, `claim`ing,
   * takes it; or, locating, nobody holds it), else asks the holder to run
   * `operation` with `args`. A holder that moved the agent meanwhile or died
   * is looked up again (a dead holder's agents are then acted on here).
   */
  async routed<T>(
    agentId: string,
    operation: string,
    args: unknown[],
    local: () => Promise<T>,
    options: { claim?: boolean; timeoutMs?: number } = {}
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const where = await this.placement.where(agentId, options.claim ? 'claim' : 'locate')
      if (where.here) return this.here(agentId, local)
      try {
        const link = this.placement.link
        return await link.call<T>(where.peer.peerUrl, operation, args, options.timeoutMs)
      } catch (error) {
        const retry = error instanceof PeerMovedError || error instanceof PeerUnreachableError
        if (!retry) throw error
        if (attempt >= ATTEMPTS) {
          throw new ServiceUnavailableException('The agent is changing hands; try again', {
            cause: error,
          })
        }
        await sleep(250 * attempt)
      }
    }
  }

  /** Runs an operation on an agent held here (counted: its lease is in use meanwhile). */
  async here<T>(agentId: string, work: () => Promise<T>): Promise<T> {
    this.#busy.set(agentId, (this.#busy.get(agentId) ?? 0) + 1)
    try {
      return await work()
    } finally {
      const left = (this.#busy.get(agentId) ?? 1) - 1
      if (left > 0) this.#busy.set(agentId, left)
      else this.#busy.delete(agentId)
    }
  }

  /**
   * Serves `operation` to the peers: `work` runs only while this instance
   * holds the agent `agentOf(args)` names (or, `claim`ing, takes it); else
   * the peer is told it moved and looks again.
   */
  serve(
    operation: string,
    agentOf: (args: unknown[]) => string,
    work: (args: unknown[]) => Promise<unknown>,
    options: { claim?: boolean } = {}
  ) {
    this.placement.link.handle(operation, async (args) => {
      const agentId = agentOf(args)
      const claimed = options.claim ? await this.placement.claim(agentId) : undefined
      if (!(claimed?.held ?? this.placement.heldHere(agentId))) {
        throw new PeerMovedError(`agent ${agentId} is not held by this instance`)
      }
      return this.here(agentId, () => work(args))
    })
  }
}
