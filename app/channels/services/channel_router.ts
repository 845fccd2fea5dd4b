import db from '@adonisjs/lucid/services/db'
import limiter from '@adonisjs/limiter/services/main'
import logger from '@adonisjs/core/services/logger'
import { chatConfig } from '#config/chat'
import {
  ContentBlockedException,
  InsufficientCreditsException,
} from '#core/exceptions/api_exceptions'
import Agent from '#agents/models/agent'
import { decryptSecrets } from '#agents/services/config_secrets'
import { recordFeedEvent } from '#agents/services/feed_service'
import { chatWithAgent } from '#chat/services/chat_service'
import { BudgetExceededException } from '#credits/services/credit_budgets'
import { cleanText } from '#core/http/input_gate_middleware'
import { channelSettings, normalizeSender, safeErrorText } from '#channels/services/channel_config'
import { splitMessage } from '#channels/services/split_message'
import type { ChannelInboundMessage, ChannelPlugin, ChannelReplier } from '#plugins/types'

/**
 * The ingress router (docs/channels.md): every message a connector
 * receives goes through here to the chat service, and the reply goes back
 * through the connector's replier. In order: own messages and empty text
 * are dropped -> the owner's allowlist -> at most once (the channel-side id
 * is a primary key) -> per-sender rate limit -> typing -> chat service
 * (conversation history, credits, knowledge, wake of a sleeping agent) ->
 * reply split at the channel's limit.
 */

/** Messages one sender may send an agent per minute on one channel (protects the owner's credits). */
export const SENDER_MESSAGES_PER_MINUTE = 12
/** Earlier exchanges of the same conversation given to the agent as context. */
const CONVERSATION_TURNS = 10
/** Typing indicators last about 5 s on most channels. */
const TYPING_EVERY_MS = 4000

const perSender = limiter.use({ requests: SENDER_MESSAGES_PER_MINUTE, duration: '1 minute' })

export type RouteOutcome =
  'answered' | 'ignored' | 'duplicate' | 'not_allowed' | 'rate_limited' | 'failed'

export const OUT_OF_CREDITS_REPLY =
  "Sorry, I can't answer right now: my owner's AI Credits are used up."
/** The owner's monthly budget (the agent's or the account's) refused the model call. */
export const OUT_OF_BUDGET_REPLY =
  "Sorry, I can't answer right now: my monthly AI Credit budget is used up."
export const BLOCKED_REPLY = "Sorry, I can't help with that message."
export const FAILED_REPLY = 'Sorry, something went wrong while answering. Please try again later.'

function allowed(allowFrom: string[] | undefined, sender: ChannelInboundMessage['sender']) {
  if (!allowFrom) return true
  const names = [sender.id, sender.handle].filter((name): name is string => !!name)
  return names.some((name) => allowFrom.includes(normalizeSender(name)))
}

/** A channel-side id as stored: PostgreSQL text takes no NUL (replies still use the original). */
function storedId(id: string): string {
  return cleanText(id, true).slice(0, 200)
}

/** Inserts the message; false when this channel-side id was already received. */
async function claimMessage(agentId: string, channel: string, message: ChannelInboundMessage) {
  const result = await db.rawQuery(
    `insert into channel_messages (agent_id, channel, message_id, conversation_id, sender_id, text)
     values (?, ?, ?, ?, ?, ?) on conflict do nothing returning message_id`,
    [
      agentId,
      channel,
      storedId(message.id),
      storedId(message.conversationId),
      storedId(message.sender.id),
      message.text,
    ]
  )
  return result.rows.length > 0
}

async function finish(
  agentId: string,
  channel: string,
  messageId: string,
  outcome: RouteOutcome,
  reply?: string
) {
  await db.rawQuery(
    `update channel_messages set outcome = ?, reply = ?
     where agent_id = ? and channel = ? and message_id = ?`,
    [outcome, reply ?? null, agentId, channel, storedId(messageId)]
  )
}

/** The conversation's earlier answered exchanges, oldest first. */
async function conversationTurns(agentId: string, channel: string, conversationId: string) {
  const result = await db.rawQuery(
    `select text, reply from channel_messages
     where agent_id = ? and channel = ? and conversation_id = ? and outcome = 'answered'
     order by received_at desc limit ?`,
    [agentId, channel, storedId(conversationId), CONVERSATION_TURNS]
  )
  const limit = chatConfig.historyEntryMaxLength
  return (result.rows as Array<{ text: string; reply: string }>).reverse().flatMap((row) => [
    { role: 'user' as const, content: row.text.slice(0, limit) },
    { role: 'assistant' as const, content: row.reply.slice(0, limit) },
  ])
}

/** Keeps "typing..." shown until stopped; failures of the indicator never matter. */
function keepTyping(replier: ChannelReplier, conversationId: string): () => void {
  if (!replier.typing) return () => {}
  const show = () => replier.typing!(conversationId).catch(() => {})
  show()
  const timer = setInterval(show, TYPING_EVERY_MS)
  return () => clearInterval(timer)
}

async function sendReply(
  plugin: ChannelPlugin,
  replier: ChannelReplier,
  message: ChannelInboundMessage,
  text: string
) {
  const parts = splitMessage(text, plugin.maxMessageLength)
  for (const [index, part] of parts.entries()) {
    await replier.send(
      { conversationId: message.conversationId, replyTo: index === 0 ? message.id : undefined },
      part
    )
  }
}

/** Routes one inbound message of `agentId`'s `plugin` connection; answers what happened to it. */
export async function routeInbound(
  agentId: string,
  plugin: ChannelPlugin,
  message: ChannelInboundMessage,
  replier: ChannelReplier
): Promise<RouteOutcome> {
  // The HTTP input gate does not see channel traffic: rather than refuse
  // someone's message, control characters and unpaired surrogates are removed.
  const text = cleanText(message.text).trim()
  if (message.fromSelf || !text) return 'ignored'
  const agent = await Agent.find(agentId)
  if (!agent) return 'ignored'
  const channel = plugin.name
  const settings = channelSettings(decryptSecrets(agent.config)).get(channel)
  if (!allowed(settings?.allowFrom, message.sender)) return 'not_allowed'
  if (!(await claimMessage(agentId, channel, { ...message, text }))) return 'duplicate'

  const rate = await perSender.increment(`channel:${agentId}:${channel}:${message.sender.id}`)
  if (rate.consumed > SENDER_MESSAGES_PER_MINUTE) {
    await finish(agentId, channel, message.id, 'rate_limited')
    return 'rate_limited'
  }

  const stopTyping = keepTyping(replier, message.conversationId)
  let reply: string
  let outcome: RouteOutcome = 'answered'
  try {
    const answer = await chatWithAgent(
      agent,
      {
        message: text.slice(0, chatConfig.messageMaxLength),
        history: await conversationTurns(agentId, channel, message.conversationId),
      },
      { source: 'channel' }
    )
    reply = answer.content
  } catch (error) {
    outcome = 'failed'
    if (error instanceof BudgetExceededException) reply = OUT_OF_BUDGET_REPLY
    else if (error instanceof InsufficientCreditsException) reply = OUT_OF_CREDITS_REPLY
    else if (error instanceof ContentBlockedException) reply = BLOCKED_REPLY
    else {
      reply = FAILED_REPLY
      const why = safeErrorText(error, settings?.credentials ?? {})
      logger.warn({ agentId, channel, error: why }, 'channel: the agent could not answer')
      await recordFeedEvent(agentId, {
        type: 'error',
        content: `${channel}: the agent could not answer a message (${why})`,
      })
    }
  } finally {
    stopTyping()
  }
  try {
    await sendReply(plugin, replier, message, reply)
  } catch (error) {
    outcome = 'failed'
    const why = safeErrorText(error, settings?.credentials ?? {})
    logger.warn({ agentId, channel, error: why }, 'channel: the reply could not be sent')
    await recordFeedEvent(agentId, {
      type: 'error',
      content: `${channel}: a reply could not be sent (${why})`,
    })
  }
  await finish(agentId, channel, message.id, outcome, outcome === 'answered' ? reply : undefined)
  return outcome
}
