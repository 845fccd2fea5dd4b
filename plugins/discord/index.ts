import { setTimeout as sleep } from 'node:timers/promises'
import {
  Client,
  GatewayDispatchEvents,
  GatewayIntentBits,
  type APIUser,
  type GatewayMessageCreateDispatchData,
} from '@discordjs/core'
import { DiscordAPIError, REST } from '@discordjs/rest'
import { WebSocketManager, WebSocketShardEvents } from '@discordjs/ws'
import {
  ChannelAuthError,
  definePlugin,
  type ChannelConnectContext,
  type ChannelInboundMessage,
  type ChannelReplier,
} from '#plugins/types'

/**
 * Discord bots through @discordjs/core, @discordjs/ws and @discordjs/rest
 * (`config.channels.discord.botToken`). The gateway URL comes from
 * `GET /gateway/bot` at DISCORD_API_URL (default https://discord.com/api).
 * The bot needs the Message Content intent (developer portal, Bot page).
 * Direct messages are always answered; in a server the bot answers when
 * it is mentioned. Replies reference the message answered.
 */
const INTENTS =
  GatewayIntentBits.Guilds |
  GatewayIntentBits.GuildMessages |
  GatewayIntentBits.DirectMessages |
  GatewayIntentBits.MessageContent

const REFUSED = 'Discord refused the bot token (revoked or wrong); reset it on the Bot page'
/** Gateway close code for a refused token. */
const AUTHENTICATION_FAILED = 4004
const READY_TIMEOUT_MS = 30_000

function inbound(
  message: GatewayMessageCreateDispatchData,
  me: APIUser
): ChannelInboundMessage | undefined {
  if (message.author.bot || !message.content) return undefined
  let text = message.content
  if (message.guild_id) {
    const mentioned = message.mentions.some((user) => user.id === me.id)
    if (!mentioned) return undefined
    text = text.replaceAll(new RegExp(`<@!?${me.id}>`, 'g'), '').trim()
  }
  return {
    id: message.id,
    conversationId: message.channel_id,
    sender: {
      id: message.author.id,
      handle: message.author.username,
      name: message.author.global_name ?? undefined,
    },
    text,
    fromSelf: message.author.id === me.id,
  }
}

function replierFor(client: Client): ChannelReplier {
  return {
    async send(target, text) {
      await client.api.channels.createMessage(target.conversationId, {
        content: text,
        ...(target.replyTo
          ? { message_reference: { message_id: target.replyTo, fail_if_not_exists: false } }
          : {}),
      })
    },
    async typing(conversationId) {
      await client.api.channels.showTyping(conversationId)
    },
  }
}

export default definePlugin({
  kind: 'channel',
  name: 'discord',
  version: '1.0.0',
  description: 'Discord bots (gateway and REST) through discord.js',
  maxMessageLength: 2000,
  connectsBy: 'config',

  validateCredentials(credentials) {
    const token = credentials.botToken
    if (typeof token !== 'string' || !/^[\w.-]{30,120}$/.test(token.trim())) {
      throw new Error(
        'botToken must be the bot token from the Bot page of the Discord developer portal'
      )
    }
    const unknown = Object.keys(credentials).filter((key) => key !== 'botToken')
    if (unknown.length > 0) throw new Error(`unknown field ${unknown[0]}`)
    return { botToken: token.trim() }
  },

  async connect(context: ChannelConnectContext) {
    const token = String(context.credentials.botToken)
    const rest = new REST({
      version: '10',
      ...(context.apiBaseUrl ? { api: context.apiBaseUrl.replace(/\/+$/, '') } : {}),
    }).setToken(token)
    const gateway = new WebSocketManager({ token, intents: INTENTS, rest })
    const client = new Client({ rest, gateway })
    const ready = new Promise<APIUser>((resolve) =>
      client.once(GatewayDispatchEvents.Ready, ({ data }) => resolve(data.user))
    )
    let me: APIUser | undefined
    const replier = replierFor(client)
    client.on(GatewayDispatchEvents.MessageCreate, ({ data }) => {
      const message = me && inbound(data, me)
      if (!message) return
      context
        .receive(message, replier)
        .catch((error) => context.log('discord: routing failed', { error: String(error) }))
    })
    gateway.on(WebSocketShardEvents.Closed, (code) => {
      if (code === AUTHENTICATION_FAILED && !context.signal.aborted) {
        context.report({ state: 'error', error: REFUSED })
      }
    })

    const destroy = () => Promise.resolve(gateway.destroy()).catch(() => {})
    try {
      await gateway.connect()
    } catch (error) {
      await destroy()
      if (error instanceof DiscordAPIError && error.status === 401) {
        throw new ChannelAuthError(REFUSED)
      }
      throw error
    }
    // READY, or give up after READY_TIMEOUT_MS (or when the connection is ended first).
    const waiting = new AbortController()
    const ended = () => waiting.abort()
    context.signal.addEventListener('abort', ended, { once: true })
    const timeout = sleep(READY_TIMEOUT_MS, undefined, { signal: waiting.signal }).then(() => {
      throw new Error('Discord did not send READY in time')
    })
    try {
      me = await Promise.race([ready, timeout])
    } catch (error) {
      await destroy()
      throw context.signal.aborted ? new Error('The connection was ended before READY') : error
    } finally {
      waiting.abort()
      timeout.catch(() => {})
      context.signal.removeEventListener('abort', ended)
    }
    return {
      identity: { username: me.username },
      close: destroy,
    }
  },
})
