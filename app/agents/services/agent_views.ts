import app from '@adonisjs/core/services/app'
import type { MonitoringFigures, WorkspaceFiles } from '#runtime/types'
import type Agent from '#agents/models/agent'

async function runtime() {
  return app.container.make('runtime')
}

/** Spec "Agent status": the stored status, the container id, the message count. */
export async function statusOf(agent: Agent) {
  const service = await runtime()
  const info = await service.status(agent.id)
  return { status: agent.status, containerId: info.containerId, messageCount: agent.messageCount }
}

/** Spec "Agent stats" (messages counted by the chat area on the agent row). */
export async function statsOf(agent: Agent) {
  const service = await runtime()
  const stats = await service.stats(agent.id)
  return {
    messagesProcessed: agent.messageCount,
    uptimeSecs: stats.uptimeSecs,
    lastActiveAt: agent.lastActiveAt?.toUTC().toISO() ?? null,
    containerId: stats.containerId,
    status: agent.status,
  }
}

/** Spec "Monitoring"; 409 AGENT_NOT_RUNNING when the container is not running. */
export async function monitoringOf(agent: Agent): Promise<MonitoringFigures> {
  const service = await runtime()
  const figures = await service.monitoring(agent.id)
  return {
    cpuPercent: Math.round(figures.cpuPercent * 100) / 100,
    memoryMb: Math.round(figures.memoryMb * 100) / 100,
    memoryLimitMb: figures.memoryLimitMb,
    restartCount: figures.restartCount,
    status: figures.status,
  }
}

/** `{ memory }` from the framework's memory store; 409 when not running. */
export async function memoryOf(agent: Agent) {
  const service = await runtime()
  return { memory: await service.memory(agent.id) }
}

/** The workspace file manager; 409 when not running, 403 for paths outside the workspace. */
export async function filesOf(agent: Agent): Promise<WorkspaceFiles> {
  const service = await runtime()
  return service.files(agent.id)
}
