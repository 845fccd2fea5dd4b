import { phaseIn } from '#runtime/boot_phases'
import { uptimeSecs } from '#runtime/runtime_reads'
import app from '@adonisjs/core/services/app'
import type { MonitoringFigures, WorkspaceFiles } from '#runtime/types'
import type Agent from '#agents/models/agent'
import { AgentNotRunningException } from '#core/exceptions/api_exceptions'
import { containerField, type ContainerField } from '#agents/services/container_field'

async function runtime() {
  return app.container.make('runtime')
}

/** CONTRACT.md `container`: running, starting, queued, sleeping, stopped or error. */
export async function containerOf(agent: Agent): Promise<ContainerField> {
  const service = await runtime()
  return containerField(agent, await service.containerView(agent.id))
}

/**
 * `container`, its id, its place in the boot queue (while queued) and its
 * boot phase, in one look at the runtime (asked of the instance that holds
 * the agent when another one does).
 */
async function containerState(agent: Agent) {
  const service = await runtime()
  const seen = await service.snapshot(agent.id)
  const container = containerField(agent, seen.view)
  return {
    info: seen.info,
    container,
    queuePosition: container === 'queued' ? seen.queuePosition : null,
    ...phaseIn(seen.phase, container),
  }
}

/** Spec "Agent status" plus `container`, `queuePosition` and the boot phase. */
export async function statusOf(agent: Agent) {
  const { info, container, queuePosition, phase, phaseSince } = await containerState(agent)
  return {
    status: agent.status,
    containerId: info.containerId,
    messageCount: agent.messageCount,
    container,
    queuePosition,
    phase,
    phaseSince,
  }
}

/** Spec "Agent stats" (messages counted by the chat area on the agent row). */
export async function statsOf(agent: Agent) {
  const { info, container, queuePosition, phase, phaseSince } = await containerState(agent)
  return {
    messagesProcessed: agent.messageCount,
    uptimeSecs: uptimeSecs(info),
    lastActiveAt: agent.lastActiveAt?.toUTC().toISO() ?? null,
    containerId: info.containerId,
    status: agent.status,
    container,
    queuePosition,
    phase,
    phaseSince,
  }
}

/**
 * Spec "Monitoring" plus `container`. A sleeping, queued or starting agent
 * holds no memory yet: zeros, not 409 (CONTRACT.md); 409
 * AGENT_NOT_RUNNING for a stopped, paused or failed one.
 */
export async function monitoringOf(
  agent: Agent
): Promise<Omit<MonitoringFigures, 'status'> & { status: string; container: ContainerField }> {
  const service = await runtime()
  const container = await containerOf(agent)
  if (container === 'stopped' || container === 'error') throw new AgentNotRunningException()
  if (container !== 'running') {
    return {
      cpuPercent: 0,
      memoryMb: 0,
      memoryLimitMb: 0,
      restartCount: 0,
      status: container,
      container,
    }
  }
  const figures = await service.monitoring(agent.id)
  return {
    cpuPercent: Math.round(figures.cpuPercent * 100) / 100,
    memoryMb: Math.round(figures.memoryMb * 100) / 100,
    memoryLimitMb: figures.memoryLimitMb,
    restartCount: figures.restartCount,
    status: figures.status,
    container,
  }
}

/**
 * True when the agent's folders may be used whatever its container does
 * (running, booting, restarting after a crash, asleep, queued): they are on
 * disk or in its volume either way. Asking whether it runs first would race
 * with a restart and answer 409 for an agent its owner wants on.
 */
function foldersUsable(agent: Agent): boolean {
  return agent.status === 'active'
}

/** `{ memory }` from the framework's memory store; read from disk while it sleeps; 409 when stopped. */
export async function memoryOf(agent: Agent) {
  // By the stored status: a stop finishes in the background, its container may still run.
  if (!foldersUsable(agent)) throw new AgentNotRunningException()
  const service = await runtime()
  return { memory: await service.memoryAtRest(agent.id, agent.framework) }
}

/**
 * The workspace file manager: the running container's, or the folders of
 * a sleeping one (without waking it); 409 when stopped, paused or failed;
 * 403 for paths outside the workspace.
 */
export async function filesOf(agent: Agent): Promise<WorkspaceFiles> {
  if (!foldersUsable(agent)) throw new AgentNotRunningException()
  const service = await runtime()
  return service.filesAtRest(agent.id)
}
