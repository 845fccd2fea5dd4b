import type { HttpContext } from '@adonisjs/core/http'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import { assertConfigDepth } from '#agents/services/agent_config'
import { presentDetail, presentPublic } from '#agents/services/agent_presenter'
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

  async show({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return presentDetail(agent)
  }

  async update({ bouncer, params, request }: HttpContext) {
    const input = await request.validateUsing(updateAgentValidator)
    assertConfigDepth(input.config)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return updateAgent(agent, input)
  }

  async destroy({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('delete', agent)
    return deleteAgent(agent)
  }

  async bySlug({ bouncer, params }: HttpContext) {
    const agent = await agentBySlug(String(params.slug))
    return (await bouncer.with(AgentPolicy).allows('view', agent))
      ? presentDetail(agent)
      : presentPublic(agent)
  }
}
