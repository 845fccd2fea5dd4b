import type { ContainerView } from '#runtime/runtime_service'
import type Agent from '#agents/models/agent'

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
