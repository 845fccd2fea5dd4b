import Agent from '#agents/models/agent'
import type { AgentLifecycle } from '#agents/services/agent_lifecycle'
import type { RuntimeService } from '#runtime/runtime_service'

/**
 * Agents this instance took over from an instance of the same host that
 * died or stalled (their runtime lease went to it; docs/runtime.md "Many
 * machines"), each in its own order of operations: one still running is
 * adopted (its processes keep running, nothing boots), one that should run
 * and does not (it waited in the dead instance's boot queue) is started,
 * one asleep stays asleep, one stopped, paused or failed is stopped (what
 * its record names is ended), one deleted meanwhile is removed.
 */
export function adoptOrphans(
  lifecycle: AgentLifecycle,
  runtime: RuntimeService,
  agentIds: string[]
): void {
  for (const agentId of agentIds) {
    lifecycle.inOrder('adopt', agentId, async () => {
      const agent = await Agent.find(agentId)
      if (!agent) return runtime.remove(agentId)
      const { state } = await runtime.status(agentId)
      const running = state === 'running'
      if (agent.status !== 'active' || (!running && agent.sleepingSince)) {
        return runtime.stop(agentId)
      }
      const runId = await runtime.planRun(agentId)
      await lifecycle.startRun(agentId, runId, { priority: 'background' })
    })
  }
}
