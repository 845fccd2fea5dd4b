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
  /**
   * @index
   * @summary Knowledge files of the agent
   * @description An array of knowledge files (size in UTF-8 bytes).
   * @responseBody 200 - {"success":true,"data":[{"filename":"faq.txt","size":1234,"uploadedAt":"2026-11-24T12:00:00.000Z"}]}
   */
  async index({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return listKnowledge(agent)
  }

  /**
   * @store
   * @summary Upload a knowledge file
   * @description Plain text up to 500 KB (UTF-8 bytes); a plain filename (no folders or control characters, at most 255 bytes); the same filename replaces the file. 400 beyond the plan's knowledge per agent. Works whether the agent runs, sleeps or is stopped.
   * @requestBody {"filename":"faq.txt","content":"Opening hours: 9 to 5."}
   * @responseBody 201 - {"success":true,"data":{"filename":"faq.txt","size":22,"uploadedAt":"2026-11-24T12:00:00.000Z"}}
   */
  async store({ auth, bouncer, params, request, response }: HttpContext) {
    const input = await request.validateUsing(uploadKnowledgeValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    response.status(201)
    return uploadKnowledge(auth.getUserOrFail(), agent, input)
  }

  /**
   * @destroy
   * @summary Delete a knowledge file
   * @description 404 when the agent has no file of that name.
   * @responseBody 200 - {"success":true,"data":{"deleted":"faq.txt"}}
   */
  async destroy({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return deleteKnowledge(agent, params.filename)
  }
}
