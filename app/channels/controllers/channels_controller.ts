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
  /**
   * @pair
   * @summary Pair a channel by QR code (whatsapp)
   * @description Starts a WhatsApp Web multi-device session and answers its first QR code as a data:image/png;base64 URL, valid about 60 s; scanning it in WhatsApp (Linked devices) links the agent. The raw QR text is not answered: the image is what a page shows. 400 for an unknown channel or one that connects with credentials in config.channels; 409 AGENT_NOT_RUNNING when the agent is stopped, paused or in error.
   * @requestBody {"channel":"whatsapp"}
   * @responseBody 200 - {"success":true,"data":{"qrCode":"data:image/png;base64,iVBORw0KGgo...","expiresIn":60}}
   */
  async pair({ bouncer, params, request }: HttpContext) {
    const { channel } = await request.validateUsing(channelNameValidator)
    const plugin = pairingChannel(channel)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return pairChannel(agent, plugin)
  }

  /**
   * @disconnect
   * @summary Disconnect a channel
   * @description A configured channel loses its credentials (a new config version; allowFrom is kept); a paired one its session. The same answer when nothing was connected. 400 for an unknown channel.
   * @requestBody {"channel":"telegram"}
   * @responseBody 200 - {"success":true,"data":{"disconnected":"telegram"}}
   */
  async disconnect({ bouncer, params, request }: HttpContext) {
    const { channel } = await request.validateUsing(channelNameValidator)
    const plugin = channelPlugin(channel)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return disconnectChannel(agent, plugin)
  }

  /**
   * @status
   * @summary Status of every channel
   * @description One entry per channel: connected, the account when connected (username for telegram and discord, phone for whatsapp, handle for twitter), state (disconnected, connecting, connected, qr_pending, error, logged_out) and lastError in words.
   * @responseBody 200 - {"success":true,"data":{"telegram":{"connected":true,"username":"support_bot","state":"connected","lastError":null},"discord":{"connected":false,"state":"disconnected","lastError":null},"whatsapp":{"connected":false,"state":"qr_pending","lastError":null},"twitter":{"connected":false,"state":"error","lastError":"The X API refused the credentials (401)"}}}
   * @nullable lastError
   */
  async status({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return channelStatus(agent)
  }

  /**
   * @webhook
   * @summary Pushed updates of a channel (Telegram webhook)
   * @description Registered with the channel by the service itself when APP_URL is public https; 404 for an unknown connection or a wrong secret.
   * @responseBody 200 - {"success":true,"data":{"ok":true}}
   */
  async webhook({ params, request }: HttpContext) {
    return receiveWebhook(params.connectionId, params.secret, request.body())
  }
}
