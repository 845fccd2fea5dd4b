import type { HttpContext } from '@adonisjs/core/http'
import { ownedAgent } from '#agents/services/agent_access'
import { replaceHistoryValidator } from '#chat/validators/chat_validators'
import { clearHistory, historyOf, replaceHistory } from '#chat/services/history_service'
import { analyticsOf } from '#chat/services/analytics_service'

export default class HistoryController {
  async index({ auth, params }: HttpContext) {
    const agent = await ownedAgent(auth.getUserOrFail(), params.id)
    return { messages: await historyOf(agent.id) }
  }

  async replace({ auth, params, request }: HttpContext) {
    const agent = await ownedAgent(auth.getUserOrFail(), params.id)
    const { messages } = await request.validateUsing(replaceHistoryValidator)
    return { saved: await replaceHistory(agent.id, messages) }
  }

  async clear({ auth, params }: HttpContext) {
    const agent = await ownedAgent(auth.getUserOrFail(), params.id)
    await clearHistory(agent.id)
    return { cleared: true }
  }

  async analytics({ auth, params }: HttpContext) {
    const agent = await ownedAgent(auth.getUserOrFail(), params.id)
    return analyticsOf(agent.id)
  }
}
