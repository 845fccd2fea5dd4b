import db from '@adonisjs/lucid/services/db'
import emitter from '@adonisjs/core/services/emitter'
import logger from '@adonisjs/core/services/logger'
import { notify } from '#identity/services/notification_service'
import { agentLimitFor, lockAgentSlots } from '#billing/services/agent_limits'
import {
  lockAgentsOf,
  PAUSED_STATUS,
  RESUMED_STATUS,
  setAgentStatus,
} from '#billing/services/agent_usage'

/**
 * Event for the agents/runtime area: an account's agent limit was applied.
 * `paused` agents must have their containers stopped, `resumed` ones started.
 * Emitted after the status change committed, when agents changed or the
 * limit itself changed (a lapse or a purchase).
 */
export const AGENT_LIMIT_CHANGED = 'agents:limit_changed'

export interface AgentLimitChanged {
  userId: string
  agentLimit: number
  /** Agents set to `paused` (newest beyond the limit). */
  paused: string[]
  /** Agents set back to `active` (oldest paused first). */
  resumed: string[]
}

declare module '@adonisjs/core/types' {
  interface EventsList {
    'agents:limit_changed': AgentLimitChanged
  }
}

function plural(count: number, word: string) {
  return `${count} ${word}${count === 1 ? '' : 's'}`
}

/**
 * Applies the account's current agent limit to its agents: the oldest
 * `agentLimit` agents that are not paused stay as they are; the newer ones
 * beyond it are paused (status `paused`). When the limit is higher than the
 * agents not paused, paused agents are resumed, oldest first. The owner is
 * notified in the same transaction; the runtime hears about it through
 * `agents:limit_changed` after commit. Safe to call any time, repeatedly.
 */
export async function enforceAgentLimit(
  userId: string,
  options: { limitChanged?: boolean } = {}
): Promise<AgentLimitChanged> {
  const change = await db.transaction(async (trx) => {
    await lockAgentSlots(trx, userId)
    const agentLimit = await agentLimitFor(userId, { client: trx })
    const agents = await lockAgentsOf(userId, trx)
    const live = agents.filter((agent) => agent.status !== PAUSED_STATUS)
    const paused = agents.filter((agent) => agent.status === PAUSED_STATUS)

    const toPause = live.length > agentLimit ? live.slice(agentLimit).map((a) => a.id) : []
    const toResume =
      live.length < agentLimit ? paused.slice(0, agentLimit - live.length).map((a) => a.id) : []
    await setAgentStatus(toPause, PAUSED_STATUS, trx)
    await setAgentStatus(toResume, RESUMED_STATUS, trx)

    if (toPause.length > 0) {
      await notify(
        userId,
        {
          type: 'agents_paused',
          title: `${plural(toPause.length, 'agent')} paused`,
          body: `Your plan now allows ${plural(agentLimit, 'agent')}, so your newest ${plural(toPause.length, 'agent')} beyond that ${toPause.length === 1 ? 'was' : 'were'} paused. Renew your plan or add an agent pack and ${toPause.length === 1 ? 'it resumes' : 'they resume'} automatically.`,
        },
        { trx }
      )
    }
    if (toResume.length > 0) {
      await notify(
        userId,
        {
          type: 'agents_resumed',
          title: `${plural(toResume.length, 'agent')} resumed`,
          body: `Your plan now allows ${plural(agentLimit, 'agent')}, so ${plural(toResume.length, 'paused agent')} ${toResume.length === 1 ? 'was' : 'were'} resumed.`,
        },
        { trx }
      )
    }
    return { userId, agentLimit, paused: toPause, resumed: toResume }
  })

  if (options.limitChanged || change.paused.length > 0 || change.resumed.length > 0) {
    try {
      await emitter.emit(AGENT_LIMIT_CHANGED, change)
    } catch (error) {
      // The statuses are committed; a failing listener must not undo the answer.
      logger.error({ err: error, userId }, 'an agents:limit_changed listener failed')
    }
  }
  return change
}

/** enforceAgentLimit that logs instead of failing (after a purchase already committed). */
export async function enforceAgentLimitQuietly(
  userId: string,
  options: { limitChanged?: boolean } = {}
): Promise<void> {
  try {
    await enforceAgentLimit(userId, options)
  } catch (error) {
    logger.error({ err: error, userId }, 'applying the agent limit failed')
  }
}
