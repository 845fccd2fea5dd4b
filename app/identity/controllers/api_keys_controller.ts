import type { HttpContext } from '@adonisjs/core/http'
import { apiKeyValidator } from '#identity/validators/auth_validators'
import { createApiKey, listApiKeys, revokeApiKey } from '#identity/services/api_key_service'

export default class ApiKeysController {
  /**
   * @store
   * @summary Create an API key
   * @description JWT; verified e-mail required. The full `key` is returned only here.
   * @requestBody {"label":"ci"}
   * @responseBody 201 - {"success":true,"data":{"id":"9b1d...","label":"ci","key":"hk_OWIxZC....","prefix":"hk_OWIxZC0z","createdAt":"2025-01-01T00:00:00.000Z"}}
   */
  async store({ auth, request, response }: HttpContext) {
    const { label } = await request.validateUsing(apiKeyValidator)
    response.status(201)
    return createApiKey(auth.getUserOrFail(), label)
  }

  /**
   * @index
   * @summary List API keys
   * @description Without secrets.
   * @responseBody 200 - {"success":true,"data":{"apiKeys":[{"id":"9b1d...","label":"ci","prefix":"hk_OWIxZC0z","createdAt":"2025-01-01T00:00:00.000Z","lastUsedAt":null}]}}
   */
  async index({ auth }: HttpContext) {
    return { apiKeys: await listApiKeys(auth.getUserOrFail()) }
  }

  /**
   * @destroy
   * @summary Revoke an API key
   * @description The key is refused from the next request on.
   * @responseBody 200 - {"success":true,"data":{"id":"9b1d...","revoked":true}}
   */
  async destroy({ auth, params }: HttpContext) {
    await revokeApiKey(auth.getUserOrFail(), String(params.id))
    return { id: String(params.id), revoked: true }
  }
}
