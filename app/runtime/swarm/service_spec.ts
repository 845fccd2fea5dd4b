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
  /** The framework's whole command line (the image's entrypoint and command resolved). */
  argv: string[]
  replicas: 0 | 1
}

/** The file in the state volume naming the task allowed to run the framework (the gate). */
export const GATE_FILE = '.agent-host-task'

/**
 * Each task's own state volume: a task starts on a fresh one, which the
 * service fills with the agent's state before the framework starts
 * (app/runtime/swarm/state_sync.ts).
 */
export function taskVolumeName(agentId: string, taskId: string): string {
  return `${dockerNames(agentId).volume}-${taskId}`
}

/**
 * Runs before the framework in every task: waits until the gate file names
 * this task ($AGENT_HOST_TASK, filled in by the swarm), then becomes the
 * framework. Needs /bin/sh and cat in the image (BusyBox in local images).
 */
const GATE_SCRIPT =
  'gate="$1"; shift; ' +
  'until [ "$(cat "$gate" 2>/dev/null)" = "$AGENT_HOST_TASK" ]; do sleep 0.2 2>/dev/null || sleep 1; done; ' +
  'exec "$@"'

/**
 * The Engine API body of `POST /services/create` for one agent: one replica
 * of the framework image on a state volume of each task's own, started
 * behind the state gate; every capability dropped, a read-only root and a
 * /tmp tmpfs, memory/CPU/pids limits with the memory reserved (the scheduler
 * only places it where it fits), restart on failure a bounded number of
 * times, on any node (its state follows it), the framework port published
 * on the node that runs it. Pure.
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
        Command: [
          '/bin/sh',
          '-c',
          GATE_SCRIPT,
          'agent-host-gate',
          `${input.statePath}/${GATE_FILE}`,
          ...input.argv,
        ],
        ...(input.launch.user ? { User: input.launch.user } : {}),
        Env: [
          ...Object.entries(input.launch.env).map(([key, value]) => `${key}=${value}`),
          'AGENT_HOST_TASK={{.Task.ID}}',
        ],
        Labels: labels,
        Init: true,
        ReadOnly: true,
        CapabilityDrop: ['ALL'],
        Mounts: [
          {
            Type: 'volume',
            Source: taskVolumeName(input.agentId, '{{.Task.ID}}'),
            Target: input.statePath,
            ReadOnly: false,
            VolumeOptions: {
              Labels: { [LABELS.managed]: 'true', [LABELS.agentId]: input.agentId },
            },
          },
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
      LogDriver: { Name: 'json-file', Options: { 'max-size': '5m', 'max-file': '2' } },
    },
    Mode: { Replicated: { Replicas: input.replicas } },
    EndpointSpec: {
      // Host mode: the node running the task binds a free port (the routing mesh needs IPVS).
      Ports: [{ Protocol: 'tcp', TargetPort: input.containerPort, PublishMode: 'host' }],
    },
  }
}
