import type { HttpContext } from '@adonisjs/core/http'
import {
  deleteKnowledge,
  listKnowledge,
  uploadKnowledge,
} from '#knowledge/services/knowledge_service'
import { uploadKnowledgeValidator } from '#knowledge/validators/knowledge_validators'

/** An agent's knowledge files (docs/knowledge.md). */
export default class KnowledgeController {
  async index({ auth, params }: HttpContext) {
    return listKnowledge(auth.getUserOrFail(), params.id)
  }

  async store({ auth, params, request, response }: HttpContext) {
    const input = await request.validateUsing(uploadKnowledgeValidator)
    response.status(201)
    return uploadKnowledge(auth.getUserOrFail(), params.id, input)
  }

  async destroy({ auth, params }: HttpContext) {
    return deleteKnowledge(auth.getUserOrFail(), params.id, params.filename)
  }
}
