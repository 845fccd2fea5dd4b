import logger from '@adonisjs/core/services/logger'
import { chatConfig } from '#config/chat'
import { takeStreamSlot } from '#core/http/stream_slots'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import type Agent from '#agents/models/agent'
import { findAgent } from '#agents/services/agent_access'
import { isUuid } from '#core/http/ids'
import { decryptSecrets } from '#agents/services/config_secrets'
import { pruneFeedNowAndThen } from '#agents/services/feed_service'
import type { ChatTarget } from '#runtime/chat_client'
import { chatValidator, testChatValidator } from '#chat/validators/chat_validators'
import { assertAllowed } from '#chat/services/safety_filter'
import { knowledgePresenceSql, knowledgeSection } from '#chat/services/system_prompt'
import { recentTurns, recordExchange, type StoredTurn } from '#chat/services/history_service'
import { accountKey, afterReply, agentKey } from '#core/http/after_reply'
import {
  containerTarget,
  route,
  viaHosted,
  type RouteContext,
  type RoutedReply,
} from '#chat/services/turn_routes'
import type { ChatSource, ChatTurn } from '#chat/services/types'

/**
 * The one chat service: the programmatic route, the SSE stream, the
 * WebSocket, the inbound webhook (and later schedules and channels) all
 * call `chatWithAgent`. In order: validate -> safety filter (422, nothing
 * stored or charged) -> context (the request's history, else the agent's
 * newest stored turns) -> route -> store both messages and count them ->
 * feed `message` event -> `{ content, model }`.
 *
 * Routing: the agent's running container (its framework); else the
 * customer's own provider key from the agent config (no credits); else the
 * hosted model through the metered model proxy (credits). A container
 * that fails falls back to the next path (logged with the reason), unless
 * a streamed reply had already sent tokens.
 */
export interface ChatOptions {
  source: ChatSource
  /** The caller went away: the model call is cancelled, nothing is stored. */
  signal?: AbortSignal
  /** Streams the reply when given. */
  onToken?: (token: string) => void
  /**
   * Called once every check passed (validation, safety, credits held for
   * the hosted path) and a model is about to answer: a stream's headers go
   * out here, so earlier failures can still be plain JSON errors.
   */
  onBegin?: () => void
  /** Lookups started while the route read the agent row (see prefetchChat). */
  prefetched?: ChatPrefetch
}

/**
 * The lookups of a chat that need only the agent id and the message: the
 * knowledge passages, where the agent's container answers and (when the
 * request brings none) its stored history. A route
 * starts them alongside its own agent lookup (and ownership check), so
 * they are not one more database round trip on the reply's path; they
 * read and return nothing unless that check passes and the message
 * validates to the same text.
 */
export interface ChatPrefetch {
  agentId: string
  message: string
  /** Only for agents seen with knowledge before (see findChatAgent). */
  knowledge?: Promise<string>
  /** Where its running container answers, or null (turn_routes.ts, containerTarget). */
  target: Promise<ChatTarget | null>
  /** Its newest stored turns, when the request brings no history of its own. */
  history?: Promise<StoredTurn[]>
}

/**
 * Agents last seen with knowledge, a hint only: their knowledge search is
 * started alongside the agent read. Whether an agent has knowledge is
 * decided by the flag read with its row (findChatAgent), never by this set.
 */
const knowledgeHint = new Set<string>()

function rememberKnowledge(agentId: string, has: boolean) {
  if (!has) {
    knowledgeHint.delete(agentId)
    return
  }
  if (knowledgeHint.size >= 10_000) knowledgeHint.delete(knowledgeHint.values().next().value!)
  knowledgeHint.add(agentId)
}

export function prefetchChat(agentId: unknown, input: unknown): ChatPrefetch | undefined {
  const raw = (input as { message?: unknown } | null)?.message
  if (!isUuid(agentId) || typeof raw !== 'string') return undefined
  const message = raw.trim()
  if (!message || message.length > chatConfig.messageMaxLength) return undefined
  const id = agentId.toLowerCase()
  const prefetch: ChatPrefetch = { agentId: id, message, target: containerTarget(id) }
  const history = (input as { history?: unknown }).history
  // VineJS reads null as absent: the stored turns answer then too.
  if (history === undefined || history === null) {
    prefetch.history = recentTurns(id, chatConfig.historyMaxEntries)
    prefetch.history.catch(() => {})
  }
  if (knowledgeHint.has(id)) {
    prefetch.knowledge = knowledgeSection(id, message)
    // Settled or not, an unused prefetch must not be an unhandled rejection.
    prefetch.knowledge.catch(() => {})
  }
  return prefetch
}

/**
 * The chat routes' agent read (findAgent), with the knowledge source's
 * presence flag in the same round trip when the source registered one: an
 * agent without knowledge costs no knowledge search.
 */
export function findChatAgent(id: unknown): Promise<Agent> {
  const presence = knowledgePresenceSql()
  return findAgent(id, presence ? { extra: `${presence} as has_knowledge` } : {})
}

export interface ChatAnswer {
  content: string
  model: string
}

/** The request was cancelled by its caller (who is gone and sees no answer). */
export class ChatAbortedError extends ServiceUnavailableException {
  constructor() {
    super('The chat request was cancelled by the client')
  }
}

type ChatRequest = Awaited<ReturnType<typeof chatValidator.validate>>

function feedSnippet(source: ChatSource, message: string): string {
  const text = message.replace(/\s+/g, ' ').trim()
  return `Message via ${source}: ${text.length > 200 ? `${text.slice(0, 200)}...` : text}`
}

/** Chat with an agent on any channel. `input` is `{ message, history? }` as the client sent it. */
export async function chatWithAgent(
  agent: Agent,
  input: unknown,
  options: ChatOptions
): Promise<ChatAnswer> {
  const request = await chatValidator.validate(input)
  assertAllowed(request.message)
  // The agent's concurrent-chat slot (429 beyond it), taken while the history is read.
  const slot = takeStreamSlot('agentChats', agent.id)
  slot.catch(() => {})
  try {
    return await answerChat(agent, request, options, slot)
  } finally {
    slot.then(
      (release) => release(),
      () => {}
    )
  }
}

async function answerChat(
  agent: Agent,
  request: ChatRequest,
  options: ChatOptions,
  slot: Promise<unknown>
): Promise<ChatAnswer> {
  const receivedAt = new Date()
  const config = decryptSecrets(agent.config)
  // Started before (by the route) or now; awaited where needed, so they overlap each other
  // and the stored-history read.
  const prefetched =
    options.prefetched?.agentId === agent.id && options.prefetched.message === request.message
      ? options.prefetched
      : undefined
  const hasKnowledge: unknown = agent.$extras.has_knowledge
  if (typeof hasKnowledge === 'boolean') rememberKnowledge(agent.id, hasKnowledge)
  const knowledge =
    hasKnowledge === false
      ? Promise.resolve('')
      : (prefetched?.knowledge ?? knowledgeSection(agent.id, request.message))
  knowledge.catch(() => {})
  const target = prefetched?.target ?? containerTarget(agent.id)
  const history: StoredTurn[] =
    request.history ??
    (await (prefetched?.history ?? recentTurns(agent.id, chatConfig.historyMaxEntries)))
  const context: RouteContext = {
    agent,
    config,
    turns: [...history, { role: 'user', content: request.message }],
    options,
    knowledge,
    target,
    streamed: 0,
    began: false,
  }
  await slot

  let reply: RoutedReply
  try {
    ;({ reply } = await route(context))
  } catch (error) {
    if (options.signal?.aborted) throw new ChatAbortedError()
    throw error
  }
  if (options.signal?.aborted) throw new ChatAbortedError()

  const answeredAt = new Date()
  // The exchange is stored (with its feed event) while the credits settle
  // (the settlement is already sent): the answer goes out meanwhile, and
  // whatever would read these writes waits for them (after_reply.ts).
  const stored = recordExchange(
    agent.id,
    { content: request.message, at: receivedAt },
    {
      content: reply.content,
      at: answeredAt > receivedAt ? answeredAt : new Date(receivedAt.getTime() + 1),
    },
    feedSnippet(options.source, request.message)
  ).then((recorded) => {
    // Now and then a delete, tracked by nothing: no reader needs it done.
    if (!recorded) return
    pruneFeedNowAndThen(agent.id).catch((error) =>
      logger.warn({ agentId: agent.id, err: error }, 'chat: feed prune failed')
    )
  })
  afterReply.track(
    [accountKey(agent.userId), agentKey(agent.id)],
    Promise.all([stored, reply.settled]),
    (error) =>
      logger.error({ agentId: agent.id, err: error }, 'chat: storing an answered turn failed')
  )
  return { content: reply.content, model: reply.model }
}

/**
 * POST /agents/test-chat: one hosted reply for a system prompt under test
 * (no agent, nothing stored; the user's credits pay like any hosted call).
 */
export async function testChat(
  user: { id: string },
  input: unknown,
  options: ChatOptions
): Promise<{ text: string; model: string }> {
  const request = await testChatValidator.validate(input)
  assertAllowed(request.message)
  const messages: ChatTurn[] = [
    ...(request.systemPrompt?.trim()
      ? [{ role: 'system' as const, content: request.systemPrompt }]
      : []),
    { role: 'user', content: request.message },
  ]
  try {
    const reply = await viaHosted(
      { userId: user.id, agentId: null },
      messages,
      undefined,
      options,
      () => options.onBegin?.()
    )
    await reply.settled
    return { text: reply.content, model: reply.model }
  } catch (error) {
    if (options.signal?.aborted) throw new ChatAbortedError()
    throw error
  }
}
