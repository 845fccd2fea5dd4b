/** What the channels routes take and answer (the source of their part of /openapi.json). */
import { describes, t, type Answer } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import {
  AgentNotRunningException,
  ForbiddenException,
  ServiceUnavailableException,
} from '#core/exceptions/api_exceptions'
import { channelNameValidator } from '#channels/validators/channel_validators'
import { installedChannels } from '#channels/services/channel_config'
import type {
  channelStatus,
  disconnectChannel,
  pairChannel,
} from '#channels/services/channel_service'

/** Only installed channel plugins are accepted (checked by the service, not the validator). */
const installedChannel = () => ({
  properties: { channel: { enum: installedChannels().map((channel) => channel.name) } },
})

/** Only the channels that connect by pairing (a QR code) can be paired. */
const pairingChannel = () => ({
  properties: {
    channel: {
      enum: installedChannels()
        .filter((channel) => channel.connectsBy === 'pairing')
        .map((channel) => channel.name),
    },
  },
})

const channelStatusEntry = t.object({
  connected: t.boolean(),
  state: t.enum(['disconnected', 'connecting', 'connected', 'qr_pending', 'error', 'logged_out']),
  lastError: t.nullable(t.string()),
})

export default defineContracts({
  'agents.channels.pair': {
    summary: 'Pair a channel by QR code (whatsapp)',
    description:
      'Starts a WhatsApp Web multi-device session and answers its first QR code as a data:image/png;base64 URL, valid about 60 s; scanning it in WhatsApp (Linked devices) links the agent. The raw QR text is not answered: the image is what a page shows. 400 for an unknown channel or one that connects with credentials in config.channels; 409 AGENT_NOT_RUNNING when the agent is stopped, paused or in error.',
    body: channelNameValidator,
    bodyRules: pairingChannel,
    responses: {
      200: describes<Answer<typeof pairChannel>>()(
        t.object({ qrCode: t.string(), expiresIn: t.integer() })
      ),
    },
    errors: [ForbiddenException, AgentNotRunningException, ServiceUnavailableException],
  },
  'agents.channels.disconnect': {
    summary: 'Disconnect a channel',
    description:
      'A configured channel loses its credentials (a new config version; allowFrom is kept); a paired one its session. The same answer when nothing was connected. 400 for an unknown channel.',
    body: channelNameValidator,
    bodyRules: installedChannel,
    responses: {
      200: describes<Answer<typeof disconnectChannel>>()(t.object({ disconnected: t.string() })),
    },
    errors: [ForbiddenException],
  },
  'agents.channels.status': {
    summary: 'Status of every channel',
    description:
      'One entry per installed channel: connected, the account when connected (username for telegram and discord, phone for whatsapp, handle for twitter), state (disconnected, connecting, connected, qr_pending, error, logged_out) and lastError in words.',
    responses: {
      200: describes<Answer<typeof channelStatus>>()(t.record(channelStatusEntry)),
    },
    errors: [ForbiddenException],
  },
  'channels.webhook': {
    summary: 'Pushed updates of a channel (Telegram webhook)',
    description:
      'Registered with the channel by the service itself when APP_URL is public https; 404 for an unknown connection or a wrong secret.',
    body: t.anyObject({ description: "The channel's update, read by the channel plugin" }),
    responses: { 200: t.object({ ok: t.literal(true) }) },
  },
})
