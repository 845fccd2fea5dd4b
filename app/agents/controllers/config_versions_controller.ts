import type { HttpContext } from '@adonisjs/core/http'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import { restoreConfig } from '#agents/services/agent_service'
import {
  findSnapshot,
  findVersion,
  listSnapshots,
  listVersions,
  presentVersionDetail,
} from '#agents/services/config_versions'
import { listVersionsValidator } from '#agents/validators/agent_validators'

/** Config versions and snapshots (a snapshot is a version named by its id). */
export default class ConfigVersionsController {
  /**
   * @index
   * @summary Config versions
   * @description Newest first. Every config change (creation, PATCH, restore) is a version.
   * @paramQuery limit - 1 to 100 (default 20) - @type(number)
   * @paramQuery offset - Versions to skip (default 0) - @type(number)
   * @responseBody 200 - {"success":true,"data":[{"version":2,"message":"More formal tone","createdAt":"2025-01-02T00:00:00.000Z"},{"version":1,"message":"Initial configuration","createdAt":"2025-01-01T00:00:00.000Z"}]}
   */
  async index({ bouncer, params, request }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    const query = await request.validateUsing(listVersionsValidator)
    return listVersions(agent.id, { limit: query.limit ?? 20, offset: query.offset ?? 0 })
  }

  /**
   * @show
   * @summary One config version
   * @description The full config of that version, secrets masked.
   * @responseBody 200 - {"success":true,"data":{"id":"5e6f...","version":1,"message":"Initial configuration","createdAt":"2025-01-01T00:00:00.000Z","config":{"personality":"Friendly","apiKey":"***"}}}
   */
  async show({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return presentVersionDetail(await findVersion(agent.id, params.version))
  }

  /**
   * @restore
   * @summary Restore a config version
   * @description The config becomes that version's; the restore is stored as a new version and a running container is restarted with it. Answers the updated agent, its new version and the version restored from.
   * @responseBody 200 - {"success":true,"data":{"id":"9b2f...","name":"Support Bot","slug":"support-bot-x7k2qa","status":"active","framework":"openclaw","messageCount":12,"createdAt":"2025-01-01T00:00:00.000Z","description":null,"avatarUrl":null,"config":{"personality":"Friendly","apiKey":"***"},"integrations":[],"lastActiveAt":null,"updatedAt":"2025-01-03T00:00:00.000Z","version":3,"restoredFrom":1}}
   * @nullable description, avatarUrl, lastActiveAt
   */
  async restore({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return restoreConfig(agent, (locked, trx) => findVersion(locked.id, params.version, trx))
  }

  /**
   * @snapshots
   * @summary Config snapshots
   * @description The newest 100 versions with their snapshot ids, newest first (data is the array).
   * @responseBody 200 - {"success":true,"data":[{"id":"5e6f...","version":1,"message":"Initial configuration","createdAt":"2025-01-01T00:00:00.000Z"}]}
   */
  async snapshots({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return listSnapshots(agent.id)
  }

  /**
   * @restoreSnapshot
   * @summary Restore a config snapshot
   * @description Like restoring its version: stored as a new version; answers the updated agent.
   * @responseBody 200 - {"success":true,"data":{"id":"9b2f...","name":"Support Bot","slug":"support-bot-x7k2qa","status":"active","framework":"openclaw","messageCount":12,"createdAt":"2025-01-01T00:00:00.000Z","description":null,"avatarUrl":null,"config":{"personality":"Friendly","apiKey":"***"},"integrations":[],"lastActiveAt":null,"updatedAt":"2025-01-03T00:00:00.000Z","version":3,"restoredFrom":1}}
   * @nullable description, avatarUrl, lastActiveAt
   */
  async restoreSnapshot({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return restoreConfig(agent, (locked, trx) => findSnapshot(locked.id, params.snapshotId, trx))
  }
}
