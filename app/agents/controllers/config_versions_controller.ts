import type { HttpContext } from '@adonisjs/core/http'
import { ownedAgent } from '#agents/services/agent_access'
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
  async index({ auth, params, request }: HttpContext) {
    const agent = await ownedAgent(auth.getUserOrFail(), params.id)
    const query = await request.validateUsing(listVersionsValidator)
    return listVersions(agent.id, { limit: query.limit ?? 20, offset: query.offset ?? 0 })
  }

  async show({ auth, params }: HttpContext) {
    const agent = await ownedAgent(auth.getUserOrFail(), params.id)
    return presentVersionDetail(await findVersion(agent.id, params.version))
  }

  async restore({ auth, params }: HttpContext) {
    return restoreConfig(auth.getUserOrFail(), params.id, (agent, trx) =>
      findVersion(agent.id, params.version, trx)
    )
  }

  async snapshots({ auth, params }: HttpContext) {
    const agent = await ownedAgent(auth.getUserOrFail(), params.id)
    return listSnapshots(agent.id)
  }

  async restoreSnapshot({ auth, params }: HttpContext) {
    return restoreConfig(auth.getUserOrFail(), params.id, (agent, trx) =>
      findSnapshot(agent.id, params.snapshotId, trx)
    )
  }
}
