import type { BootPriority } from '#runtime/capacity/capacity_manager'

/** A start waiting in the boot queue, as its order sees it. */
export interface QueuedStart {
  agentId: string
  /** The owning account: accounts take turns. */
  owner: string
  /** Its start resumes a checkpoint rather than boots. */
  resumes: boolean
  priority: BootPriority
  /** Arrival order. */
  seq: number
  /** When its start was asked for: it arrives then (its preparation may take longer than another's). */
  askedAt: number
}

/** Arrival: when asked for, then the order the queue saw them in. */
const byArrival = (a: QueuedStart, b: QueuedStart) => a.askedAt - b.askedAt || a.seq - b.seq

/**
 * The queue in admission order (docs/runtime.md "Boot queue order"). Fair:
 * tiers (interactive resumes, interactive boots, background resumes,
 * background boots); within a tier the accounts take turns, the least
 * recently served first (`served`: the turn each account was last served
 * at, `turn` the last one given; among those never served, fewer starts
 * waiting first, then the oldest entry), each account's own starts in
 * arrival order. `fifo`: the earlier
 * order, resumes before boots, then arrival (the bench's baseline).
 */
export function admissionOrder<T extends QueuedStart>(
  queue: T[],
  servedBefore: Map<string, number>,
  turnBefore: number,
  fifo: boolean
): T[] {
  const arrived = [...queue].sort(byArrival)
  if (fifo) return arrived.sort((a, b) => Number(b.resumes) - Number(a.resumes))
  const tier = (entry: T) => (entry.priority === 'interactive' ? 0 : 2) + (entry.resumes ? 0 : 1)
  const served = new Map(servedBefore)
  let turn = turnBefore
  const ordered: T[] = []
  for (let rank = 0; rank < 4; rank++) {
    const byOwner = new Map<string, T[]>()
    for (const entry of arrived) {
      if (tier(entry) !== rank) continue
      const own = byOwner.get(entry.owner)
      if (own) own.push(entry)
      else byOwner.set(entry.owner, [entry])
    }
    // Accounts never served yet tie: the one with fewer starts waiting goes first (a new
    // account's first agent before the accounts of a burst that have not had a turn yet).
    const owners = [...byOwner.entries()].sort(
      ([a, first], [b, second]) =>
        (served.get(a) ?? -1) - (served.get(b) ?? -1) ||
        first.length - second.length ||
        byArrival(first[0], second[0])
    )
    for (let round = 0; ; round++) {
      let any = false
      for (const [owner, entries] of owners) {
        if (round >= entries.length) continue
        ordered.push(entries[round])
        served.set(owner, ++turn)
        any = true
      }
      if (!any) break
    }
  }
  return ordered
}
