import type { HttpContext } from '@adonisjs/core/http'
import {
  channelStatus,
  disconnectChannel,
  pairChannel,
  receiveWebhook,
} from '#channels/services/channel_service'
import { channelNameValidator } from '#channels/validators/channel_validators'

/** An agent's messaging channels (docs/channels.md). */
export default class ChannelsController {
  async pair({ auth, params, request }: HttpContext) {
    const { channel } = await request.validateUsing(channelNameValidator)
    return pairChannel(auth.getUserOrFail(), params.id, channel)
  }

  async disconnect({ auth, params, request }: HttpContext) {
    const { channel } = await request.validateUsing(channelNameValidator)
    return disconnectChannel(auth.getUserOrFail(), params.id, channel)
  }

  async status({ auth, params }: HttpContext) {
    return channelStatus(auth.getUserOrFail(), params.id)
  }

  async webhook({ params, request }: HttpContext) {
    return receiveWebhook(params.connectionId, params.secret, request.body())
  }
}
