import app from '@adonisjs/core/services/app'
import logger from '@adonisjs/core/services/logger'
import {
  AgentNotRunningException,
  ServiceUnavailableException,
} from '#core/exceptions/api_exceptions'
import type Agent from '#agents/models/agent'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import type { ChatTarget } from '#runtime/chat_client'
import { ModelGatewayError } from '#core/openai/gateway_errors'
import { RuntimeService } from '#runtime/runtime_service'
import { systemPromptFor } from '#chat/services/system_prompt'
import { agentMonthlyBudget } from '#credits/services/credit_budgets'
import { hostedCompletion, openHostedStream } from '#chat/services/model_proxy'
import {
  DEFAULT_PROVIDER_MODELS,
  customerProviderChat,
  type CustomerProvider,
} from '#chat/services/customer_providers'
import type { ChatTurn, ModelReply } from '#chat/services/types'
import type { ChatOptions } from '#chat/services/chat_service'

/**
 * The three paths an agent turn can take, in order (docs/chat.md, "One chat
 * service"): the agent's running container (resolved once per message:
 * `runtime.target`), else the customer's own provider key, else the hosted
 * model through the metered model proxy. A container that fails falls back
 * to the next path, unless a streamed reply already sent tokens.
 */

export type Route = 'container' | 'customer' | 'hosted'

/** A reply, and for a hosted one the settlement of its credits (awaited with the store). */
export type RoutedReply = ModelReply & { settled?: Promise<number> }

async function runtimeService(): Promise<RuntimeService> {
  return app.container.make(RuntimeService)
}

/**
 * Where the agent's running container answers (one inspect), or null: not
 * running, or the runtime could not tell (then the other paths answer).
 */
export async function containerTarget(agentId: string): Promise<ChatTarget | null> {
  try {
    const runtime = await runtimeService()
    return await runtime.target(agentId)
  } catch (error) {
    logger.warn({ agentId, err: error }, 'chat: cannot tell whether the container runs')
    return null
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

export interface RouteContext {
  agent: Agent
  config: Record<string, unknown>
  turns: ChatTurn[]
  options: ChatOptions
  /** The knowledge passages for this message, looked up while the route is chosen. */
  knowledge: Promise<string>
  /** Where its running container answers, or null (looked up alongside the knowledge). */
  target: Promise<ChatTarget | null>
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

async function viaContainer(context: RouteContext, target: ChatTarget): Promise<ModelReply> {
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
    const reply = await runtime.chat(context.agent.id, request, target)
    return { content: reply.content, model: reply.model, usage: null }
  }
  const stream = runtime.chatStream(context.agent.id, request, target)
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
export async function viaHosted(
  payer: { userId: string; agentId: string | null; agentUnbudgeted?: boolean },
  messages: ChatTurn[],
  model: string | undefined,
  options: ChatOptions,
  onBegin: () => void,
  onToken?: (token: string) => void
): Promise<RoutedReply> {
  const hostedOptions = {
    payerId: payer.userId,
    agentId: payer.agentId,
    agentUnbudgeted: payer.agentUnbudgeted,
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
    {
      userId: context.agent.userId,
      agentId: context.agent.id,
      agentUnbudgeted: agentMonthlyBudget(config) === null,
    },
    messages,
    config.provider === undefined || config.provider === 'hosted' ? modelOf(config) : undefined,
    context.options,
    () => begin(context),
    context.options.onToken ? (token) => emit(context, token) : undefined
  )
}

export async function route(context: RouteContext): Promise<{ reply: RoutedReply; route: Route }> {
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
  const target = context.agent.status === 'active' ? await context.target : null
  if (!target) return fallback()
  try {
    return { reply: await viaContainer(context, target), route: 'container' }
  } catch (error) {
    if (context.options.signal?.aborted) throw error
    // The container stopped between the look and the call (CONTRACT: chat never answers 409).
    const stoppedMeanwhile = error instanceof AgentNotRunningException
    if (!(error instanceof ModelGatewayError) && !stoppedMeanwhile) throw error
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
