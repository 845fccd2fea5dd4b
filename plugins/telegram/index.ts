import { setTimeout as sleep } from 'node:timers/promises'
import { Bot, GrammyError, type Context } from 'grammy'
import type { UserFromGetMe } from 'grammy/types'
import {
  ChannelAuthError,
  definePlugin,
  type ChannelConnectContext,
  type ChannelInboundMessage,
  type ChannelReplier,
} from '#plugins/types'

/**
 * Telegram through grammY (docs/channels.md). One bot per agent, from
 * `config.channels.telegram.botToken`. Long polling (getUpdates) unless the
 * service has a public https address, then a webhook; never both, so
 * Telegram never answers 409 "terminated by other getUpdates request".
 * Private chats are always answered; in groups the bot answers when it is
 * mentioned or replied to.
 */
const REFUSED_TOKEN =
  'Telegram refused the bot token (revoked or wrong); set a new one from @BotFather'

const TOKEN_PATTERN = /^\d{3,20}:[\w-]{20,100}$/

/** Updates the bot asks for: text messages only. */
const ALLOWED_UPDATES = ['message'] as const

interface TelegramStore {
  botInfo?: UserFromGetMe
}

function botFor(context: ChannelConnectContext, botInfo?: UserFromGetMe): Bot {
  return new Bot(String(context.credentials.botToken), {
    botInfo,
    client: context.apiBaseUrl ? { apiRoot: context.apiBaseUrl.replace(/\/+$/, '') } : undefined,
  })
}

function refused(error: unknown): boolean {
  return error instanceof GrammyError && (error.error_code === 401 || error.error_code === 404)
}

/** grammY's getMe, with refused tokens as ChannelAuthError. */
async function identify(bot: Bot): Promise<UserFromGetMe> {
  try {
    await bot.init()
    return bot.botInfo
  } catch (error) {
    if (refused(error)) {
      throw new ChannelAuthError(REFUSED_TOKEN)
    }
    throw error
  }
}

/** The message as the router wants it, or undefined when the bot should stay silent. */
function inbound(ctx: Context): ChannelInboundMessage | undefined {
  const message = ctx.message
  if (!message?.text || !message.from) return undefined
  const me = ctx.me
  let text = message.text
  if (message.chat.type !== 'private') {
    const mention = `@${me.username}`
    const repliesToBot = message.reply_to_message?.from?.id === me.id
    if (!text.includes(mention) && !repliesToBot) return undefined
    text = text.replaceAll(mention, '').trim()
  }
  return {
    id: `${message.chat.id}:${message.message_id}`,
    conversationId: String(message.chat.id),
    sender: {
      id: String(message.from.id),
      handle: message.from.username,
      name: message.from.first_name,
    },
    text,
    fromSelf: message.from.id === me.id,
  }
}

function replierFor(bot: Bot): ChannelReplier {
  return {
    async send(target, text) {
      const messageId = Number(target.replyTo?.split(':').pop())
      await bot.api.sendMessage(
        target.conversationId,
        text,
        Number.isInteger(messageId)
          ? { reply_parameters: { message_id: messageId, allow_sending_without_reply: true } }
          : {}
      )
    },
    async typing(conversationId) {
      await bot.api.sendChatAction(conversationId, 'typing')
    },
  }
}

/** Hands text messages to the router; `wait` decides whether the update waits for the answer. */
function routeMessages(bot: Bot, context: ChannelConnectContext, wait: boolean) {
  const replier = replierFor(bot)
  bot.on('message:text', async (ctx) => {
    const message = inbound(ctx)
    if (!message) return
    const routed = context.receive(message, replier)
    // Polling answers in the background so one slow reply does not hold the
    // next updates; a webhook request waits (Telegram retries it otherwise).
    if (wait) await routed
    else routed.catch((error) => context.log('telegram: routing failed', { error: String(error) }))
  })
  bot.catch((error) => context.log('telegram: update failed', { error: String(error.error) }))
}

const CONFLICT_RETRY_MS = 5000

/**
 * Long-polls until the connection ends. bot.start deletes any webhook
 * first. A 409 (another getUpdates, such as a previous holder that has not
 * stopped yet) is waited out; a refused token ends in state error.
 */
async function pollUntilAborted(
  bot: Bot,
  context: ChannelConnectContext,
  identity: Record<string, string>
) {
  let restarted = false
  while (!context.signal.aborted) {
    try {
      await bot.start({
        allowed_updates: [...ALLOWED_UPDATES],
        onStart: () => {
          if (restarted) context.report({ state: 'connected', identity })
        },
      })
      return
    } catch (error) {
      if (context.signal.aborted) return
      if (error instanceof GrammyError && error.error_code === 409) {
        restarted = true
        context.report({ state: 'connecting', error: `Telegram: ${error.description}` })
        await sleep(CONFLICT_RETRY_MS, undefined, { signal: context.signal }).catch(() => {})
        continue
      }
      context.report({
        state: 'error',
        error: refused(error)
          ? REFUSED_TOKEN
          : `Telegram polling stopped: ${(error as Error).message}`,
      })
      return
    }
  }
}

export default definePlugin({
  kind: 'channel',
  name: 'telegram',
  version: '1.0.0',
  description: 'Telegram bots (Bot API) through grammY',
  maxMessageLength: 4096,
  connectsBy: 'config',

  validateCredentials(credentials) {
    const token = credentials.botToken
    if (typeof token !== 'string' || !TOKEN_PATTERN.test(token.trim())) {
      throw new Error(
        'botToken must be a Telegram bot token such as 123456789:AA... from @BotFather'
      )
    }
    const unknown = Object.keys(credentials).filter((key) => key !== 'botToken')
    if (unknown.length > 0) throw new Error(`unknown field ${unknown[0]}`)
    return { botToken: token.trim() }
  },

  async connect(context) {
    const bot = botFor(context)
    const botInfo = await identify(bot)
    await context.store.save({ botInfo } satisfies TelegramStore)
    const identity = { username: botInfo.username }

    if (context.webhookUrl) {
      await bot.api.setWebhook(context.webhookUrl, { allowed_updates: [...ALLOWED_UPDATES] })
      return {
        identity,
        async close(reason) {
          if (reason === 'removed') await bot.api.deleteWebhook().catch(() => {})
        },
      }
    }

    routeMessages(bot, context, false)
    const polling = pollUntilAborted(bot, context, identity)
    return {
      identity,
      async close() {
        await bot.stop().catch(() => {})
        await polling
      },
    }
  },

  async webhook(context, body) {
    const stored = await context.store.load<TelegramStore>()
    const bot = botFor(context, stored?.botInfo)
    if (!stored?.botInfo) await identify(bot)
    routeMessages(bot, context, true)
    await bot.handleUpdate(body as Parameters<Bot['handleUpdate']>[0])
  },
})
