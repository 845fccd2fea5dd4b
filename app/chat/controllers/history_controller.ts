import type { HttpContext } from '@adonisjs/core/http'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import { replaceHistoryValidator } from '#chat/validators/chat_validators'
import { clearHistory, historyOf, replaceHistory } from '#chat/services/history_service'
import { analyticsOf } from '#chat/services/analytics_service'

export default class HistoryController {
  /**
   * @index
   * @summary Stored conversation
   * @description The agent's stored messages, oldest first: the newest 200 of the last 30 days. `ts` is Unix time in milliseconds.
   * @responseBody 200 - {"success":true,"data":{"messages":[{"role":"user","content":"Hi","ts":1735689600000},{"role":"assistant","content":"Hello!","ts":1735689600850}]}}
   */
  async index({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return { messages: await historyOf(agent.id) }
  }

  /**
   * @replace
   * @summary Replace the stored conversation
   * @description The given messages (at most 200) become the whole stored history. Counters and analytics are not changed.
   * @requestBody {"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"}]}
   * @responseBody 200 - {"success":true,"data":{"saved":2}}
   */
  async replace({ bouncer, params, request }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    const { messages } = await request.validateUsing(replaceHistoryValidator)
    return { saved: await replaceHistory(agent.id, messages) }
  }

  /**
   * @clear
   * @summary Clear the stored conversation
   * @description Counters and analytics are not changed.
   * @responseBody 200 - {"success":true,"data":{"cleared":true}}
   */
  async clear({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    await clearHistory(agent.id)
    return { cleared: true }
  }

  /**
   * @analytics
   * @summary Messages per day
   * @description Processed messages (user messages answered, on every channel) per UTC day for the last 7 days including today, oldest first; days without messages are 0. `avgPerDay` = total / 7, two decimals.
   * @responseBody 200 - {"success":true,"data":{"days":[{"date":"2025-01-01","messages":0},{"date":"2025-01-02","messages":4},{"date":"2025-01-03","messages":0},{"date":"2025-01-04","messages":12},{"date":"2025-01-05","messages":0},{"date":"2025-01-06","messages":3},{"date":"2025-01-07","messages":1}],"total":20,"peak":12,"avgPerDay":2.86}}
   */
  async analytics({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return analyticsOf(agent.id)
  }
}
