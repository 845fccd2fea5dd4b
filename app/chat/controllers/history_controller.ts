import type { HttpContext } from '@adonisjs/core/http'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import { replaceHistoryValidator } from '#chat/validators/chat_validators'
import { clearHistory, historyOf, replaceHistory } from '#chat/services/history_service'
import { analyticsOf } from '#chat/services/analytics_service'

export default class HistoryController {
  async index({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return { messages: await historyOf(agent.id) }
  }

  async replace({ bouncer, params, request }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    const { messages } = await request.validateUsing(replaceHistoryValidator)
    return { saved: await replaceHistory(agent.id, messages) }
  }

  async clear({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    await clearHistory(agent.id)
    return { cleared: true }
  }

  async analytics({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return analyticsOf(agent.id)
  }
}
