import type Docker from 'dockerode'
import type { AgentResources, ContainerLaunch } from '#plugins/types'

/** Labels on every object the docker driver makes: how it finds them again. */
export const LABELS = {
  managed: 'agent-host.managed',
  agentId: 'agent-host.agent-id',
  framework: 'agent-host.framework',
  /** The run id the API answered when the run was scheduled (the engine's own id differs). */
  runId: 'agent-host.run-id',
} as const

/**
 * Relative CPU weight of an agent's container: half of Docker's default
 * (1024), so under contention agents (heavy framework boots above all) yield
 * to the service and other work on the host. Only matters when CPU is short.
 */
export const AGENT_CPU_SHARES = 512

/** Names of one agent's container, state volume and network. */
export function dockerNames(agentId: string) {
  return {
    container: `agent-host-${agentId}`,
    volume: `agent-host-${agentId}-state`,
    network: `agent-host-${agentId}`,
  }
}

export interface ContainerSpecInput {
  agentId: string
  framework: string
  launch: ContainerLaunch
  /** The framework's port inside the container (the plugin's defaultPort). */
  containerPort: number
  /** Where the state volume is mounted (the plugin's containerPaths.state). */
  statePath: string
  resources: AgentResources
  /** Restarts Docker makes after crashes before the container stays down (`error`). */
  maxRestarts: number
  /** `name:address` entries for /etc/hosts (the model proxy relay's `host-gateway`). */
  extraHosts?: string[]
  /** The run id scheduled for it (CreateRequest.containerId). */
  runId?: string
}

/**
 * The Engine API body of `POST /containers/create` for one agent: the
 * framework's pinned image; its state on a named volume; memory, CPU and
 * pid limits (no swap beyond the memory limit), a lower CPU weight; every capability dropped
 * and no-new-privileges; a read-only root file system; its own bridge network; the framework's port
 * published on 127.0.0.1 only (the engine picks the host port); restart on
 * failure a bounded number of times; json-file logs capped in size; labels
 * naming the agent. A pure function: unit-tested without an engine.
 */
export function buildContainerSpec(input: ContainerSpecInput): Docker.ContainerCreateOptions {
  const names = dockerNames(input.agentId)
  const port = `${input.containerPort}/tcp`
  const memoryBytes = Math.round(input.resources.memoryMb * 1024 * 1024)
  return {
    name: names.container,
    Image: input.launch.image,
    ...(input.launch.command ? { Cmd: input.launch.command } : {}),
    ...(input.launch.user ? { User: input.launch.user } : {}),
    Env: Object.entries(input.launch.env).map(([key, value]) => `${key}=${value}`),
    Labels: {
      [LABELS.managed]: 'true',
      [LABELS.agentId]: input.agentId,
      [LABELS.framework]: input.framework,
      ...(input.runId ? { [LABELS.runId]: input.runId } : {}),
    },
    ExposedPorts: { [port]: {} },
    HostConfig: {
      Memory: memoryBytes,
      MemorySwap: memoryBytes,
      NanoCpus: Math.round(input.resources.cpus * 1e9),
      CpuShares: AGENT_CPU_SHARES,
      PidsLimit: input.resources.pids,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true'],
      Init: true,
      // Only the state volume and /tmp are writable.
      ReadonlyRootfs: true,
      Mounts: [{ Type: 'volume', Source: names.volume, Target: input.statePath, ReadOnly: false }],
      Tmpfs: { '/tmp': 'rw,nosuid,nodev,size=256m' },
      PortBindings: { [port]: [{ HostIp: '127.0.0.1', HostPort: '' }] },
      NetworkMode: names.network,
      ...(input.extraHosts?.length ? { ExtraHosts: input.extraHosts } : {}),
      RestartPolicy: { Name: 'on-failure', MaximumRetryCount: input.maxRestarts },
      LogConfig: { Type: 'json-file', Config: { 'max-size': '5m', 'max-file': '2' } },
    },
    NetworkingConfig: { EndpointsConfig: { [names.network]: {} } },
  }
}
