import type { ContainerSpecInput } from '#runtime/docker/container_spec'
import { dockerNames, LABELS } from '#runtime/docker/container_spec'

/** Swarm's own label naming a task container's service. */
export const SERVICE_NAME_LABEL = 'com.docker.swarm.service.name'

/** What the swarm driver keeps on the service itself (no file on the service's host). */
export const RECORD_LABELS = {
  statePath: 'agent-host.state-path',
  workspacePath: 'agent-host.workspace-path',
  containerPort: 'agent-host.container-port',
  user: 'agent-host.user',
} as const

export interface ServiceSpecInput extends ContainerSpecInput {
  workspacePath: string
  /** `node.id==...`: the node holding the agent's state volume. */
  constraints: string[]
  replicas: 0 | 1
}

/**
 * The Engine API body of `POST /services/create` for one agent: one replica
 * of the framework image with its state volume, every capability dropped,
 * a read-only root and a /tmp tmpfs, memory/CPU/pids limits with the memory
 * reserved (the scheduler only places it where it fits), restart on failure
 * a bounded number of times, pinned to the node holding its state, the
 * framework port published on the node that runs it. Pure.
 */
export function buildServiceSpec(input: ServiceSpecInput) {
  const names = dockerNames(input.agentId)
  const memoryBytes = Math.round(input.resources.memoryMb * 1024 * 1024)
  const labels = {
    [LABELS.managed]: 'true',
    [LABELS.agentId]: input.agentId,
    [LABELS.framework]: input.framework,
    [RECORD_LABELS.statePath]: input.statePath,
    [RECORD_LABELS.workspacePath]: input.workspacePath,
    [RECORD_LABELS.containerPort]: String(input.containerPort),
    [RECORD_LABELS.user]: input.launch.user ?? '',
    ...(input.runId ? { [LABELS.runId]: input.runId } : {}),
  }
  return {
    Name: names.container,
    Labels: labels,
    TaskTemplate: {
      ContainerSpec: {
        Image: input.launch.image,
        ...(input.launch.command ? { Command: input.launch.command } : {}),
        ...(input.launch.user ? { User: input.launch.user } : {}),
        Env: Object.entries(input.launch.env).map(([key, value]) => `${key}=${value}`),
        Labels: labels,
        Init: true,
        ReadOnly: true,
        CapabilityDrop: ['ALL'],
        Mounts: [
          { Type: 'volume', Source: names.volume, Target: input.statePath, ReadOnly: false },
          { Type: 'tmpfs', Target: '/tmp', TmpfsOptions: { SizeBytes: 256 * 1024 * 1024 } },
        ],
        StopGracePeriod: 10_000_000_000,
      },
      Resources: {
        Limits: {
          MemoryBytes: memoryBytes,
          NanoCPUs: Math.round(input.resources.cpus * 1e9),
          Pids: input.resources.pids,
        },
        Reservations: { MemoryBytes: memoryBytes },
      },
      RestartPolicy: {
        Condition: 'on-failure',
        Delay: 1_000_000_000,
        MaxAttempts: input.maxRestarts,
      },
      Placement: { Constraints: input.constraints },
      LogDriver: { Name: 'json-file', Options: { 'max-size': '5m', 'max-file': '2' } },
    },
    Mode: { Replicated: { Replicas: input.replicas } },
    EndpointSpec: {
      // Host mode: the node running the task binds a free port (the routing mesh needs IPVS).
      Ports: [{ Protocol: 'tcp', TargetPort: input.containerPort, PublishMode: 'host' }],
    },
  }
}
