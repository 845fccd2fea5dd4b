import type { HttpContext } from '@adonisjs/core/http'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import {
  deleteKnowledge,
  listKnowledge,
  uploadKnowledge,
} from '#knowledge/services/knowledge_service'
import { uploadKnowledgeValidator } from '#knowledge/validators/knowledge_validators'

/** An agent's knowledge files (docs/knowledge.md). */
export default class KnowledgeController {
  async index({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return listKnowledge(agent)
  }

  async store({ auth, bouncer, params, request, response }: HttpContext) {
    const input = await request.validateUsing(uploadKnowledgeValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    response.status(201)
    return uploadKnowledge(auth.getUserOrFail(), agent, input)
  }

  async destroy({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return deleteKnowledge(agent, params.filename)
  }
}
