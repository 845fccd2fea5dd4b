import { chatConfig } from '#config/chat'
import { emptyCompletion, openAiUsage } from '#core/openai/wire'
import { modelGateway, type ModelEndpoint } from '#core/openai/model_gateway'
import type { ChatTurn, ModelReply } from '#chat/services/types'

/**
 * Chat with the customer's own provider key from the agent's config
 * (`provider: openai | anthropic | openrouter`, `apiKey`, `model`): the
 * provider bills the customer, no AI Credits are spent. OpenAI and
 * OpenRouter speak the OpenAI chat-completions format; Anthropic its
 * Messages API with its own stream events.
 */
export type CustomerProvider = 'openai' | 'anthropic' | 'openrouter'

export const DEFAULT_PROVIDER_MODELS: Record<CustomerProvider, string> = {
  openai: 'gpt-4o-mini',
  anthropic: 'claude-sonnet-4-5',
  openrouter: 'openrouter/auto',
}

export interface ProviderCall {
  provider: CustomerProvider
  apiKey: string
  model: string
  messages: ChatTurn[]
  signal?: AbortSignal
  /** Streams when given: called with each content delta. */
  onToken?: (token: string) => void
}

const ANTHROPIC_VERSION = '2023-06-01'
const ANTHROPIC_MAX_TOKENS = 4096

const PROVIDER_NAMES: Record<CustomerProvider, string> = {
  openai: 'OpenAI',
  anthropic: 'Anthropic',
  openrouter: 'OpenRouter',
}

/** The provider's endpoint at `url`, called with the customer's key (its refusal named so). */
function endpointOf(
  call: ProviderCall,
  url: string,
  headers: Record<string, string>
): ModelEndpoint {
  return {
    url,
    headers,
    party: { name: PROVIDER_NAMES[call.provider], credential: "the agent's API key" },
    timeoutMs: chatConfig.providerTimeoutMs,
    idleTimeoutMs: chatConfig.providerStreamIdleTimeoutMs,
  }
}

async function openAiCompatible(call: ProviderCall): Promise<ModelReply> {
  const base = chatConfig.providerEndpoints[call.provider as 'openai' | 'openrouter']
  const headers: Record<string, string> = { authorization: `Bearer ${call.apiKey}` }
  if (call.provider === 'openrouter') headers['x-title'] = 'Agent Host'
  const endpoint = endpointOf(call, `${base}/chat/completions`, headers)
  const body = { model: call.model, messages: call.messages }
  if (!call.onToken) {
    const reply = await modelGateway.complete(
      endpoint,
      { ...body, stream: false },
      { signal: call.signal, requireContent: true }
    )
    return { content: reply.content!, model: reply.model, usage: reply.usage }
  }
  const reply = emptyCompletion(call.model)
  const chunks = await modelGateway.stream(
    endpoint,
    { ...body, stream: true, stream_options: { include_usage: true } },
    { signal: call.signal, reply }
  )
  for await (const chunk of chunks) if (chunk.token) call.onToken(chunk.token)
  return { content: reply.content, model: reply.model, usage: reply.usage }
}

/**
 * The Messages API wants the system prompt apart and turns that alternate,
 * starting with the user: consecutive turns of one role are joined and
 * leading assistant turns dropped.
 */
export function anthropicMessages(turns: ChatTurn[]) {
  const system = turns
    .filter((turn) => turn.role === 'system')
    .map((turn) => turn.content)
    .join('\n\n')
  const messages: { role: 'user' | 'assistant'; content: string }[] = []
  for (const turn of turns) {
    if (turn.role === 'system') continue
    if (messages.length === 0 && turn.role === 'assistant') continue
    const last = messages[messages.length - 1]
    if (last?.role === turn.role) last.content += `\n\n${turn.content}`
    else messages.push({ role: turn.role, content: turn.content })
  }
  return { system, messages }
}

/** The Messages API answer's text: its text blocks joined. */
function anthropicText(body: any): string {
  return body.content
    .filter((block: any) => block?.type === 'text' && typeof block.text === 'string')
    .map((block: any) => block.text)
    .join('')
}

async function anthropic(call: ProviderCall): Promise<ModelReply> {
  const { system, messages } = anthropicMessages(call.messages)
  const stream = Boolean(call.onToken)
  const endpoint = endpointOf(call, `${chatConfig.providerEndpoints.anthropic}/messages`, {
    'x-api-key': call.apiKey,
    'anthropic-version': ANTHROPIC_VERSION,
  })
  const answer = await modelGateway.open(
    endpoint,
    {
      model: call.model,
      max_tokens: ANTHROPIC_MAX_TOKENS,
      ...(system ? { system } : {}),
      messages,
      stream,
    },
    { stream, signal: call.signal }
  )
  if (!stream) {
    const body = await answer.json()
    if (!Array.isArray(body?.content)) {
      throw modelGateway.failure(endpoint.party, { kind: 'unreadable', detail: 'no content' })
    }
    return {
      content: anthropicText(body),
      model: String(body.model ?? call.model),
      usage: openAiUsage(body),
    }
  }
  // Its own stream events: message_start (model, input tokens), text deltas, message_delta
  // (output tokens), message_stop (the end marker), error.
  let content = ''
  let model = call.model
  let inputTokens = 0
  let outputTokens = 0
  let stopped = false
  for await (const { event, data } of answer.events()) {
    let payload: any
    try {
      payload = JSON.parse(data)
    } catch {
      continue
    }
    const type = payload?.type ?? event
    if (type === 'error') {
      throw modelGateway.failure(endpoint.party, {
        kind: 'reported',
        detail: payload?.error?.message ?? payload?.error?.type ?? 'stream error',
      })
    }
    if (type === 'message_start') {
      model = payload.message?.model ?? model
      inputTokens = Number(payload.message?.usage?.input_tokens ?? 0)
      outputTokens = Number(payload.message?.usage?.output_tokens ?? 0)
    } else if (type === 'content_block_delta' && payload.delta?.type === 'text_delta') {
      const token = payload.delta.text
      if (typeof token === 'string' && token) {
        content += token
        call.onToken!(token)
      }
    } else if (type === 'message_delta') {
      outputTokens = Number(payload.usage?.output_tokens ?? outputTokens)
    } else if (type === 'message_stop') {
      stopped = true
    }
  }
  if (!stopped) throw modelGateway.failure(endpoint.party, { kind: 'cut_short' })
  return { content, model, usage: { inputTokens, outputTokens } }
}

export function customerProviderChat(call: ProviderCall): Promise<ModelReply> {
  return call.provider === 'anthropic' ? anthropic(call) : openAiCompatible(call)
}
