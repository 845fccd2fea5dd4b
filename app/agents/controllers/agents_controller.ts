import type { HttpContext } from '@adonisjs/core/http'
import { ownedAgent } from '#agents/services/agent_access'
import { presentDetail } from '#agents/services/agent_presenter'
import {
  agentBySlug,
  createAgent,
  deleteAgent,
  listAgents,
  updateAgent,
} from '#agents/services/agent_service'
import {
  createAgentValidator,
  listAgentsValidator,
  updateAgentValidator,
} from '#agents/validators/agent_validators'

/** Agent CRUD: dashboard (JWT) and, for list and detail, /api/v1 (API key). */
export default class AgentsController {
  async store({ auth, request, response }: HttpContext) {
    const input = await request.validateUsing(createAgentValidator)
    response.status(201)
    return createAgent(auth.getUserOrFail(), input)
  }

  async index({ auth, request }: HttpContext) {
    const query = await request.validateUsing(listAgentsValidator)
    return listAgents(auth.getUserOrFail().id, {
      page: query.page ?? 1,
      limit: query.limit ?? 20,
    })
  }

  async show({ auth, params }: HttpContext) {
    return presentDetail(await ownedAgent(auth.getUserOrFail(), params.id))
  }

  async update({ auth, params, request }: HttpContext) {
    const input = await request.validateUsing(updateAgentValidator)
    return updateAgent(auth.getUserOrFail(), params.id, input)
  }

  async destroy({ auth, params }: HttpContext) {
    return deleteAgent(auth.getUserOrFail(), params.id)
  }

  async bySlug({ auth, params }: HttpContext) {
    return agentBySlug(String(params.slug), auth.user)
  }
}
