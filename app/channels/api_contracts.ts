/** What the channels routes take and answer (the source of their part of /openapi.json). */
import { t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import { channelNameValidator } from '#channels/validators/channel_validators'

export default defineContracts({
  'agents.channels.pair': {
    summary: 'Pair a channel by QR code (whatsapp)',
    description:
      'Starts a WhatsApp Web multi-device session and answers its first QR code as a data:image/png;base64 URL, valid about 60 s; scanning it in WhatsApp (Linked devices) links the agent. The raw QR text is not answered: the image is what a page shows. 400 for an unknown channel or one that connects with credentials in config.channels; 409 AGENT_NOT_RUNNING when the agent is stopped, paused or in error.',
    body: channelNameValidator,
    responses: {
      200: t.object({
        qrCode: t.string(),
        expiresIn: t.integer(),
      }),
    },
  },
  'agents.channels.disconnect': {
    summary: 'Disconnect a channel',
    description:
      'A configured channel loses its credentials (a new config version; allowFrom is kept); a paired one its session. The same answer when nothing was connected. 400 for an unknown channel.',
    body: channelNameValidator,
    responses: {
      200: t.object({
        disconnected: t.string(),
      }),
    },
  },
  'agents.channels.status': {
    summary: 'Status of every channel',
    description:
      'One entry per channel: connected, the account when connected (username for telegram and discord, phone for whatsapp, handle for twitter), state (disconnected, connecting, connected, qr_pending, error, logged_out) and lastError in words.',
    responses: {
      200: t.object({
        telegram: t.object({
          connected: t.boolean(),
          username: t.string(),
          state: t.string(),
          lastError: t.unknown(),
        }),
        discord: t.object({
          connected: t.boolean(),
          state: t.string(),
          lastError: t.unknown(),
        }),
        whatsapp: t.object({
          connected: t.boolean(),
          state: t.string(),
          lastError: t.unknown(),
        }),
        twitter: t.object({
          connected: t.boolean(),
          state: t.string(),
          lastError: t.nullable(t.string()),
        }),
      }),
    },
  },
  'channels.webhook': {
    summary: 'Pushed updates of a channel (Telegram webhook)',
    description:
      'Registered with the channel by the service itself when APP_URL is public https; 404 for an unknown connection or a wrong secret.',
    responses: {
      200: t.object({
        ok: t.boolean(),
      }),
    },
  },
})
