import app from '@adonisjs/core/services/app'
import logger from '@adonisjs/core/services/logger'
import { chatConfig } from '#config/chat'
import { takeStreamSlot } from '#core/http/stream_slots'
import {
  AgentNotRunningException,
  ServiceUnavailableException,
} from '#core/exceptions/api_exceptions'
import type Agent from '#agents/models/agent'
import { findAgent, isUuid } from '#agents/services/agent_access'
import { decryptSecrets } from '#agents/services/config_secrets'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { recordFeedEvent } from '#agents/services/feed_service'
import { ContainerChatError } from '#runtime/chat_client'
import { RuntimeService } from '#runtime/runtime_service'
import { chatValidator, testChatValidator } from '#chat/validators/chat_validators'
import { assertAllowed } from '#chat/services/safety_filter'
import {
  knowledgePresenceSql,
  knowledgeSection,
  systemPromptFor,
} from '#chat/services/system_prompt'
import { recentTurns, recordExchange, type StoredTurn } from '#chat/services/history_service'
import { hostedCompletion, openHostedStream } from '#chat/services/model_proxy'
import {
  DEFAULT_PROVIDER_MODELS,
  customerProviderChat,
  type CustomerProvider,
} from '#chat/services/customer_providers'
import type { ChatSource, ChatTurn, ModelReply } from '#chat/services/types'

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
 * knowledge passages and whether the agent's container runs. A route
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
  running: Promise<boolean>
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
  const prefetch: ChatPrefetch = { agentId: id, message, running: containerRunning(id) }
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

type Route = 'container' | 'customer' | 'hosted'

type ChatRequest = Awaited<ReturnType<typeof chatValidator.validate>>

/** A reply, and for a hosted one the settlement of its credits (awaited with the store). */
type RoutedReply = ModelReply & { settled?: Promise<number> }

async function runtimeService(): Promise<RuntimeService> {
  return app.container.make(RuntimeService)
}

async function containerRunning(agentId: string): Promise<boolean> {
  try {
    const runtime = await runtimeService()
    return await runtime.isRunning(agentId)
  } catch (error) {
    logger.warn({ agentId, err: error }, 'chat: cannot tell whether the container runs')
    return false
  }
}

function customerProvider(config: Record<string, unknown>): CustomerProvider | null {
  const provider = config.provider
  if (provider !== 'openai' && provider !== 'anthropic' && provider !== 'openrouter') return null
  return typeof config.apiKey === 'string' && config.apiKey ? provider : null
}

function modelOf(config: Record<string, unknown>): string | undefined {
  return typeof config.model === 'string' && config.model.trim() ? config.model.trim() : undefined
}

interface RouteContext {
  agent: Agent
  config: Record<string, unknown>
  turns: ChatTurn[]
  options: ChatOptions
  /** The knowledge passages for this message, looked up while the route is chosen. */
  knowledge: Promise<string>
  /** Whether the agent's container runs (looked up alongside the knowledge). */
  running: Promise<boolean>
  /** Tokens already sent to the caller. */
  streamed: number
  began: boolean
}

function begin(context: RouteContext) {
  if (context.began) return
  context.began = true
  context.options.onBegin?.()
}

function emit(context: RouteContext, token: string) {
  context.streamed++
  context.options.onToken!(token)
}

async function viaContainer(context: RouteContext): Promise<ModelReply> {
  const runtime = await runtimeService()
  // The framework has its own personality; the relevant knowledge travels with the message.
  const knowledge = await context.knowledge
  const request = {
    messages: knowledge
      ? [{ role: 'system' as const, content: knowledge }, ...context.turns]
      : context.turns,
    conversationId: `agent-${context.agent.id}`,
    signal: context.options.signal,
  }
  begin(context)
  if (!context.options.onToken) {
    const reply = await runtime.chat(context.agent.id, request)
    return { content: reply.content, model: reply.model, usage: null }
  }
  const stream = runtime.chatStream(context.agent.id, request)
  for (;;) {
    const next = await stream.next()
    if (next.done) return { content: next.value.content, model: next.value.model, usage: null }
    emit(context, next.value.token)
  }
}

async function viaCustomerKey(
  context: RouteContext,
  provider: CustomerProvider
): Promise<ModelReply> {
  const messages: ChatTurn[] = [
    {
      role: 'system',
      content: systemPromptFor(
        { id: context.agent.id, config: context.config },
        await context.knowledge
      ),
    },
    ...context.turns,
  ]
  begin(context)
  return customerProviderChat({
    provider,
    apiKey: String(context.config.apiKey),
    model: modelOf(context.config) ?? DEFAULT_PROVIDER_MODELS[provider],
    messages,
    signal: context.options.signal,
    onToken: context.options.onToken ? (token) => emit(context, token) : undefined,
  })
}

/** The hosted path for an agent (its owner pays) or for test-chat (the user pays). */
async function viaHosted(
  payer: { userId: string; agentId: string | null },
  messages: ChatTurn[],
  model: string | undefined,
  options: ChatOptions,
  onBegin: () => void,
  onToken?: (token: string) => void
): Promise<RoutedReply> {
  const hostedOptions = {
    payerId: payer.userId,
    agentId: payer.agentId,
    source: options.source,
    signal: options.signal,
  }
  const body = { ...(model ? { model } : {}), messages }
  if (!onToken) {
    const { reply, settled } = await hostedCompletion(body, hostedOptions)
    onBegin()
    return { ...reply, settled }
  }
  const stream = await openHostedStream(body, hostedOptions)
  try {
    onBegin()
    for await (const chunk of stream.chunks()) {
      if (chunk.token) onToken(chunk.token)
    }
    return { content: stream.content, model: stream.model, usage: stream.usage }
  } finally {
    await stream.close()
  }
}

async function viaHostedForAgent(context: RouteContext): Promise<RoutedReply> {
  const config = context.config
  const messages: ChatTurn[] = [
    {
      role: 'system',
      content: systemPromptFor({ id: context.agent.id, config }, await context.knowledge),
    },
    ...context.turns,
  ]
  return viaHosted(
    { userId: context.agent.userId, agentId: context.agent.id },
    messages,
    config.provider === undefined || config.provider === 'hosted' ? modelOf(config) : undefined,
    context.options,
    () => begin(context),
    context.options.onToken ? (token) => emit(context, token) : undefined
  )
}

async function route(context: RouteContext): Promise<{ reply: RoutedReply; route: Route }> {
  const provider = customerProvider(context.config)
  const fallback = async (): Promise<{ reply: RoutedReply; route: Route }> =>
    provider
      ? { reply: await viaCustomerKey(context, provider), route: 'customer' }
      : { reply: await viaHostedForAgent(context), route: 'hosted' }

  // Every message counts as activity; a sleeping agent starts waking now
  // and this message is answered on the hosted path meanwhile.
  agentLifecycle
    .wake(context.agent)
    .catch((error) => logger.warn({ agentId: context.agent.id, err: error }, 'chat: wake failed'))
  // A stopped agent's container may still be on its way down (stops finish
  // in the background): its owner turned it off, so it no longer answers.
  if (context.agent.status !== 'active' || !(await context.running)) return fallback()
  try {
    return { reply: await viaContainer(context), route: 'container' }
  } catch (error) {
    if (context.options.signal?.aborted) throw error
    // The container stopped between the look and the call (CONTRACT: chat never answers 409).
    const stoppedMeanwhile = error instanceof AgentNotRunningException
    if (!(error instanceof ContainerChatError) && !stoppedMeanwhile) throw error
    if (context.streamed > 0) {
      logger.warn(
        { agentId: context.agent.id, reason: error.message },
        'chat: the container failed mid-stream after sending tokens'
      )
      throw new ServiceUnavailableException(`The agent failed while answering: ${error.message}`)
    }
    logger.warn(
      { agentId: context.agent.id, reason: error.message, fallback: provider ?? 'hosted' },
      `chat: the container failed, answering through ${provider ? `the ${provider} key` : 'the hosted model'} instead`
    )
    return fallback()
  }
}

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
  const running = prefetched?.running ?? containerRunning(agent.id)
  const history: StoredTurn[] =
    request.history ?? (await recentTurns(agent.id, chatConfig.historyMaxEntries))
  const context: RouteContext = {
    agent,
    config,
    turns: [...history, { role: 'user', content: request.message }],
    options,
    knowledge,
    running,
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
  // The credits settle while the exchange is stored (two independent writes).
  const [stored] = await Promise.all([
    recordExchange(
      agent.id,
      { content: request.message, at: receivedAt },
      {
        content: reply.content,
        at: answeredAt > receivedAt ? answeredAt : new Date(receivedAt.getTime() + 1),
      }
    ),
    reply.settled,
  ])
  if (stored) {
    // After the answer is on its way: the feed is not on the reply's path.
    setImmediate(() =>
      recordFeedEvent(agent.id, {
        type: 'message',
        content: feedSnippet(options.source, request.message),
      }).catch((error) => logger.warn({ agentId: agent.id, err: error }, 'chat: feed event lost'))
    )
  }
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
