import type { HttpContext } from '@adonisjs/core/http'
import { apiKeyValidator } from '#identity/validators/auth_validators'
import { createApiKey, listApiKeys, revokeApiKey } from '#identity/services/api_key_service'

export default class ApiKeysController {
  async store({ auth, request, response }: HttpContext) {
    const { label } = await request.validateUsing(apiKeyValidator)
    response.status(201)
    return createApiKey(auth.getUserOrFail(), label)
  }

  async index({ auth }: HttpContext) {
    return { apiKeys: await listApiKeys(auth.getUserOrFail()) }
  }

  async destroy({ auth, params }: HttpContext) {
    await revokeApiKey(auth.getUserOrFail(), String(params.id))
    return { id: String(params.id), revoked: true }
  }
}
