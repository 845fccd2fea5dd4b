import Agent from '#agents/models/agent'
import { recordFeedEvent } from '#agents/services/feed_service'
import type { RuntimeService } from '#runtime/runtime_service'

/** Puts one agent to sleep in its own order of operations (AgentLifecycle.sleep). */
type SleepAgent = (agentId: string) => Promise<void>

/**
 * Puts to sleep every agent running here whose last message (stored
 * `last_active_at`, or this process's own record of it) and whose start
 * are older than `idleMs`. Returns the ids put to sleep.
 */
export async function sleepIdleAgents(
  runtime: RuntimeService,
  sleep: SleepAgent,
  idleMs: number,
  now = Date.now()
): Promise<string[]> {
  const candidates = runtime
    .admittedAgents()
    .filter((entry) => !entry.booting && entry.lastActiveAt < now - idleMs)
  if (candidates.length === 0) return []
  const rows = await Agent.query()
    .whereIn(
      'id',
      candidates.map((entry) => entry.agentId)
    )
    .select('id', 'last_active_at')
  const lastMessage = new Map(rows.map((row) => [row.id, row.lastActiveAt?.toMillis() ?? 0]))
  const idle = candidates
    .filter((entry) => (lastMessage.get(entry.agentId) ?? 0) < now - idleMs)
    .map((entry) => entry.agentId)
  await Promise.allSettled(idle.map((agentId) => sleep(agentId)))
  return idle
}

/**
 * Puts to sleep every agent running here whose own writes took its
 * workspace past the quota; it stays asleep (messages answered on the
 * hosted path, files manageable) until enough is deleted. Returns the ids.
 */
export async function sleepAgentsOverQuota(
  runtime: RuntimeService,
  sleep: SleepAgent
): Promise<string[]> {
  const over: string[] = []
  for (const entry of runtime.admittedAgents()) {
    if (!entry.booting && (await runtime.workspaceOverQuota(entry.agentId))) {
      over.push(entry.agentId)
    }
  }
  await Promise.allSettled(
    over.map(async (agentId) => {
      await sleep(agentId)
      await recordFeedEvent(agentId, {
        type: 'error',
        content:
          'Workspace over its quota: the agent was put to sleep and stays asleep ' +
          'until files are deleted through the file manager',
      })
    })
  )
  return over
}
