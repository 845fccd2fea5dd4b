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
  /**
   * @store
   * @summary Create an agent
   * @description name 2-50 characters; framework an installed framework plugin (openclaw, hermes); config is checked by the framework. Beyond the plan's agent limit: 400. The container starts in the background.
   * @requestBody {"name":"Support Bot","framework":"openclaw","description":"Answers questions","config":{"personality":"Friendly and brief","provider":"openai","apiKey":"sk-..."}}
   * @responseBody 201 - {"success":true,"data":{"id":"9b2f...","name":"Support Bot","slug":"support-bot-x7k2qa","status":"active","framework":"openclaw","messageCount":0,"createdAt":"2025-01-01T00:00:00.000Z","description":"Answers questions","avatarUrl":null,"config":{"personality":"Friendly and brief","provider":"openai","apiKey":"***"},"integrations":[],"lastActiveAt":null,"updatedAt":"2025-01-01T00:00:00.000Z"}}
   * @nullable description, avatarUrl, lastActiveAt
   */
  async store({ auth, request, response }: HttpContext) {
    const input = await request.validateUsing(createAgentValidator)
    response.status(201)
    return createAgent(auth.getUserOrFail(), input)
  }

  /**
   * @index
   * @summary My agents
   * @description Newest first. page from 1; limit 1-100 (default 20).
   * @paramQuery page - Page number, from 1 - @type(number)
   * @paramQuery limit - Items per page, 1 to 100 (default 20) - @type(number)
   * @responseBody 200 - {"success":true,"data":{"agents":[{"id":"9b2f...","name":"Support Bot","slug":"support-bot-x7k2qa","status":"active","framework":"openclaw","messageCount":12,"createdAt":"2025-01-01T00:00:00.000Z"}],"total":1,"page":1,"limit":20}}
   */
  async index({ auth, request }: HttpContext) {
    const query = await request.validateUsing(listAgentsValidator)
    return listAgents(auth.getUserOrFail().id, {
      page: query.page ?? 1,
      limit: query.limit ?? 20,
    })
  }

  /**
   * @show
   * @summary One agent
   * @description Owner only (403 otherwise). Secret config values are answered as ***.
   * @responseBody 200 - {"success":true,"data":{"id":"9b2f...","name":"Support Bot","slug":"support-bot-x7k2qa","status":"active","framework":"openclaw","messageCount":12,"createdAt":"2025-01-01T00:00:00.000Z","description":"Answers questions","avatarUrl":null,"config":{"personality":"Friendly and brief","apiKey":"***"},"integrations":[],"lastActiveAt":"2025-01-02T10:00:00.000Z","updatedAt":"2025-01-01T00:00:00.000Z"}}
   * @nullable description, avatarUrl, lastActiveAt
   */
  async show({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return presentDetail(agent)
  }

  /**
   * @update
   * @summary Change an agent
   * @description config is deep-merged into the stored config: send only changed keys; *** for a secret keeps the stored value; null removes a key. A config change stores a new version (commitMessage or a generated message) and restarts a running container with it.
   * @requestBody {"name":"Support Bot 2","config":{"personality":"Formal"},"commitMessage":"More formal tone"}
   * @responseBody 200 - {"success":true,"data":{"id":"9b2f...","name":"Support Bot 2","slug":"support-bot-x7k2qa","status":"active","framework":"openclaw","messageCount":12,"createdAt":"2025-01-01T00:00:00.000Z","description":"Answers questions","avatarUrl":null,"config":{"personality":"Formal","apiKey":"***"},"integrations":[],"lastActiveAt":null,"updatedAt":"2025-01-03T00:00:00.000Z"}}
   * @nullable description, avatarUrl, lastActiveAt
   */
  async update({ bouncer, params, request }: HttpContext) {
    const input = await request.validateUsing(updateAgentValidator)
    assertConfigDepth(input.config)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return updateAgent(agent, input)
  }

  /**
   * @destroy
   * @summary Delete an agent
   * @description Stops and removes its container and every file it had. Irreversible.
   * @responseBody 200 - {"success":true,"data":{"deleted":true}}
   */
  async destroy({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('delete', agent)
    return deleteAgent(agent)
  }

  /**
   * @bySlug
   * @summary An agent by its slug
   * @description No credential needed. The owner (with a JWT) gets the full agent (secrets masked); anyone else id, name, slug, description, avatarUrl, framework, status.
   * @responseBody 200 - {"success":true,"data":{"id":"9b2f...","name":"Support Bot","slug":"support-bot-x7k2qa","description":"Answers questions","avatarUrl":null,"framework":"openclaw","status":"active"}}
   * @nullable description, avatarUrl
   */
  async bySlug({ bouncer, params }: HttpContext) {
    const agent = await agentBySlug(String(params.slug))
    return (await bouncer.with(AgentPolicy).allows('view', agent))
      ? presentDetail(agent)
      : presentPublic(agent)
  }
}
