import db from '@adonisjs/lucid/services/db'
import { tierPlan } from '#config/plans'
import { hostedCompletion } from '#chat/services/model_proxy'
import User from '#identity/models/user'
import type Agent from '#agents/models/agent'
import { withDailyUse } from '#tools/services/daily_allowance'

/** Spec "Research result". */
export interface ResearchResult {
  query: string
  result: string
  model: string
  completedAt: string
}

const RESEARCH_PROMPT =
  'You are a meticulous research assistant. Answer the question thoroughly and accurately: ' +
  'start with a two-sentence answer, then the key findings as bullet points, then open ' +
  'questions or caveats. Say plainly what you are unsure of; never invent sources or figures.'

/** Longest answer asked for (also what the credit hold reserves for the output). */
const RESEARCH_MAX_TOKENS = 2000

/**
 * POST /agents/:id/research: one answer from the hosted model (the owner's
 * AI Credits), stored with the model that answered. 20 per account and UTC
 * day (a failed answer gives its use back).
 */
export async function research(agent: Agent, query: string): Promise<ResearchResult> {
  const owner = await User.findOrFail(agent.userId)
  const allowance = {
    table: 'research_tasks' as const,
    userId: owner.id,
    limit: tierPlan(owner.effectiveTier).dailyResearchLimit,
    row: { agent_id: agent.id, query },
    what: 'research tasks',
  }
  return withDailyUse(allowance, async (useId) => {
    const { reply, settled } = await hostedCompletion(
      {
        messages: [
          { role: 'system', content: RESEARCH_PROMPT },
          { role: 'user', content: query },
        ],
        max_tokens: RESEARCH_MAX_TOKENS,
      },
      { payerId: owner.id, agentId: agent.id, source: 'research' }
    )
    await settled
    const completedAt = new Date()
    await db
      .from('research_tasks')
      .where('id', useId)
      .update({ result: reply.content, model: reply.model, completed_at: completedAt })
    return {
      query,
      result: reply.content,
      model: reply.model,
      completedAt: completedAt.toISOString(),
    }
  })
}
