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
  async index({ bouncer, params, request }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    const query = await request.validateUsing(listVersionsValidator)
    return listVersions(agent.id, { limit: query.limit ?? 20, offset: query.offset ?? 0 })
  }

  async show({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return presentVersionDetail(await findVersion(agent.id, params.version))
  }

  async restore({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return restoreConfig(agent, (locked, trx) => findVersion(locked.id, params.version, trx))
  }

  async snapshots({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return listSnapshots(agent.id)
  }

  async restoreSnapshot({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return restoreConfig(agent, (locked, trx) => findSnapshot(locked.id, params.snapshotId, trx))
  }
}
