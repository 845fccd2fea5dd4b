import { LABELS } from '#runtime/docker/container_spec'
import type { ContainerInfo } from '#runtime/types'

/** Task states on the way to running. */
export const PENDING = new Set([
  'new',
  'allocated',
  'pending',
  'assigned',
  'accepted',
  'preparing',
  'ready',
  'starting',
])
const FAILED = new Set(['failed', 'rejected', 'orphaned'])

/** The service label naming the task a warm sleep froze (SWARM_SLEEP=pause). */
export const PAUSED_LABEL = 'agent-host.paused-task'

/**
 * What an agent's service and its tasks (newest first) say of it, in the
 * runtime's words. `address` is where the running task's node publishes
 * ports. A service at 0 replicas, or whose running task is the one a warm
 * sleep froze, is `stopped`. Pure.
 */
export function serviceInfo(
  agentId: string,
  service: any,
  tasks: any[],
  address: (nodeId: string) => Promise<string>
): Promise<ContainerInfo> | ContainerInfo {
  const base: ContainerInfo = {
    agentId,
    driver: 'swarm',
    state: 'absent',
    containerId: null,
    framework: service?.Spec?.Labels?.[LABELS.framework] ?? null,
    baseUrl: null,
    startedAt: null,
    restartCount: 0,
    lastError: null,
  }
  if (!service) return base
  if (service.Spec.Mode?.Replicated?.Replicas === 0) return { ...base, state: 'stopped' }

  const failures = tasks.filter((task) => FAILED.has(task.Status?.State))
  const lastError = failures[0]?.Status?.Err ?? failures[0]?.Status?.Message ?? null
  const current = tasks.find((task) => task.DesiredState === 'running')
  const restartCount = failures.length
  const runId = service.Spec.Labels?.[LABELS.runId]
  if (current?.Status?.State === 'running') {
    if (service.Spec.Labels?.[PAUSED_LABEL] === current.ID) return { ...base, state: 'stopped' }
    const published = current.Status.PortStatus?.Ports?.[0]?.PublishedPort
    const running = async (): Promise<ContainerInfo> => ({
      ...base,
      state: 'running',
      containerId: runId ?? current.Status.ContainerStatus?.ContainerID ?? current.ID,
      baseUrl: published ? `http://${await address(current.NodeID)}:${published}` : null,
      startedAt: current.Status.Timestamp ? new Date(current.Status.Timestamp) : null,
      restartCount,
      lastError,
    })
    return running()
  }
  if (current && PENDING.has(current.Status?.State)) {
    return {
      ...base,
      // The run scheduled has its id before its task runs.
      containerId: runId ?? null,
      state: restartCount > 0 ? 'restarting' : 'starting',
      restartCount,
      lastError,
    }
  }
  // No task meant to run: the swarm gave up restarting it.
  return { ...base, state: failures.length > 0 ? 'error' : 'starting', restartCount, lastError }
}
