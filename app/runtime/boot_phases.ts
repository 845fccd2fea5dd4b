import type { RuntimeEvent } from '#runtime/types'

/**
 * Where an agent's container is on its way up, and since when: the API's
 * `phase` and `phaseSince` (docs/runtime.md "Boot phases"), beside the
 * coarser `container` field. Steps of a start, in order:
 *
 * - `queued`: waiting for a boot slot or memory (container `queued`);
 * - `preparing`: writing its config and files;
 * - `installing`: the framework's package is being installed (first use on
 *   this host; normally done at service start, see prepareFrameworks);
 * - `warming`: the framework's shared compile cache is being made (once per
 *   framework version on this host);
 * - `booting`: its process runs, the framework is not answering yet;
 * - `restoring`: it is being restored from its sleep checkpoint;
 *
 * then `running`, `sleeping`, `stopped` or `error`, like `container`. Kept
 * by the instance that runs the container (like readiness), in memory.
 */
export type BootStep = 'queued' | 'preparing' | 'installing' | 'warming' | 'booting' | 'restoring'
export type Phase = BootStep | 'running' | 'starting' | 'sleeping' | 'stopped' | 'error'

const BOOT_STEPS = new Set<string>([
  'queued',
  'preparing',
  'installing',
  'warming',
  'booting',
  'restoring',
])

const phases = new Map<string, { phase: Phase; since: Date }>()

/** Records the agent's phase; the same phase again keeps its first `since`. */
export function enterPhase(agentId: string, phase: Phase, at = new Date()): void {
  if (phases.get(agentId)?.phase === phase) return
  phases.set(agentId, { phase, since: at })
}

/** Phases follow the runtime's events: a boot or a restore starts, readiness, an end. */
export function phaseFromEvent(event: RuntimeEvent): void {
  switch (event.type) {
    case 'started':
      return enterPhase(event.agentId, event.restored ? 'restoring' : 'booting', event.at)
    case 'restarting':
      return enterPhase(event.agentId, 'booting', event.at)
    case 'ready':
      return enterPhase(event.agentId, 'running', event.at)
    case 'sleeping':
      return enterPhase(event.agentId, 'sleeping', event.at)
    case 'stopped':
      return enterPhase(event.agentId, 'stopped', event.at)
    case 'error':
      return enterPhase(event.agentId, 'error', event.at)
  }
}

export function forgetPhase(agentId: string): void {
  phases.delete(agentId)
}

/** The phase this instance saw the agent enter last, if any (a peer asks the holder for it). */
export function knownPhase(agentId: string): { phase: Phase; since: string } | undefined {
  const known = phases.get(agentId)
  return known ? { phase: known.phase, since: known.since.toISOString() } : undefined
}

/**
 * `phase` and `phaseSince` for an agent whose `container` field is given,
 * from the phase its holder saw (`known`): while it starts, the step it is
 * at; otherwise the container state, with the time it got there when that
 * instance saw it happen (else null).
 */
export function phaseIn(
  known: { phase: Phase; since: string } | undefined,
  container: string
): { phase: Phase | string; phaseSince: string | null } {
  const starting = container === 'starting' || container === 'queued'
  if (known && (starting ? BOOT_STEPS.has(known.phase) : known.phase === container)) {
    return { phase: known.phase, phaseSince: known.since }
  }
  return { phase: container, phaseSince: null }
}

/** `phaseIn` with what this instance saw. */
export function phaseOf(
  agentId: string,
  container: string
): { phase: Phase | string; phaseSince: string | null } {
  return phaseIn(knownPhase(agentId), container)
}
