import type { HttpContext } from '@adonisjs/core/http'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import { channelPlugin } from '#channels/services/channel_config'
import {
  channelStatus,
  disconnectChannel,
  pairChannel,
  pairingChannel,
  receiveWebhook,
} from '#channels/services/channel_service'
import { channelNameValidator } from '#channels/validators/channel_validators'

/** An agent's messaging channels (docs/channels.md). */
export default class ChannelsController {
  async pair({ bouncer, params, request }: HttpContext) {
    const { channel } = await request.validateUsing(channelNameValidator)
    const plugin = pairingChannel(channel)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return pairChannel(agent, plugin)
  }

  async disconnect({ bouncer, params, request }: HttpContext) {
    const { channel } = await request.validateUsing(channelNameValidator)
    const plugin = channelPlugin(channel)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return disconnectChannel(agent, plugin)
  }

  async status({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return channelStatus(agent)
  }

  async webhook({ params, request }: HttpContext) {
    return receiveWebhook(params.connectionId, params.secret, request.body())
  }
}
