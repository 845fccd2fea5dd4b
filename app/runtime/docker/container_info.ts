import type Docker from 'dockerode'
import { LABELS } from '#runtime/docker/container_spec'
import type { DockerRecord } from '#runtime/docker/docker_record'
import type { ContainerInfo } from '#runtime/types'

/** What the runtime reports of an agent's container, from the engine's inspect and the record. */
export function containerInfo(
  agentId: string,
  container: Docker.ContainerInspectInfo,
  record: DockerRecord | undefined
): ContainerInfo {
  const state = container.State
  let status: ContainerInfo['state']
  if (state.Restarting) status = 'restarting'
  else if (state.Running) status = 'running'
  else if (state.Status === 'created' || record?.stoppedByUser !== false) status = 'stopped'
  else status = state.ExitCode === 0 ? 'stopped' : 'error'
  const port =
    record?.containerPort ??
    Number(Object.keys(container.Config.ExposedPorts ?? {})[0]?.split('/')[0])
  const binding = container.NetworkSettings?.Ports?.[`${port}/tcp`]?.[0]
  const live = status === 'running'
  return {
    agentId,
    driver: 'docker',
    state: status,
    // The id the API answered when this run was scheduled, where it was.
    containerId: container.Config.Labels?.[LABELS.runId] ?? container.Id,
    framework: container.Config.Labels?.[LABELS.framework] ?? record?.framework ?? null,
    baseUrl: live && binding?.HostPort ? `http://127.0.0.1:${binding.HostPort}` : null,
    startedAt: live && state.StartedAt ? new Date(state.StartedAt) : null,
    restartCount: container.RestartCount ?? 0,
    lastError:
      state.Error ||
      (!state.Running && state.ExitCode ? `exited with code ${state.ExitCode}` : null) ||
      (state.OOMKilled ? 'killed: out of memory' : null),
  }
}
