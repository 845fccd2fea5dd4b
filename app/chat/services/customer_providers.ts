import { chatConfig } from '#config/chat'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import { CompletionStreamError, completionDeltas, openAiUsage, sseEvents } from '#core/openai/wire'
import { upstreamRequest, type UpstreamResponse } from '#core/openai/upstream_http'
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

/** The provider failed (unreachable, refused the key, error status, broken stream). */
export class ProviderError extends ServiceUnavailableException {}

const ANTHROPIC_VERSION = '2023-06-01'
const ANTHROPIC_MAX_TOKENS = 4096

function providerLabel(provider: CustomerProvider): string {
  return { openai: 'OpenAI', anthropic: 'Anthropic', openrouter: 'OpenRouter' }[provider]
}

async function failure(call: ProviderCall, response: UpstreamResponse): Promise<never> {
  const raw = await response.text().catch(() => '')
  let message = raw
  try {
    const body = JSON.parse(raw)
    message = body?.error?.message ?? body?.message ?? raw
  } catch {}
  const label = providerLabel(call.provider)
  const reason =
    response.status === 401 || response.status === 403
      ? `${label} refused the agent's API key (${response.status})`
      : `${label} answered ${response.status}`
  throw new ProviderError(`${reason}: ${String(message).slice(0, 300)}`)
}

async function send(
  call: ProviderCall,
  url: string,
  headers: Record<string, string>,
  body: object
) {
  let response: UpstreamResponse
  try {
    response = await upstreamRequest(url, {
      body,
      headers: { accept: call.onToken ? 'text/event-stream' : 'application/json', ...headers },
      signal: call.signal,
      timeoutMs: chatConfig.providerTimeoutMs,
      idleTimeoutMs: chatConfig.providerStreamIdleTimeoutMs,
    })
  } catch (error) {
    if (call.signal?.aborted) throw error
    throw new ProviderError(
      `${providerLabel(call.provider)} is unreachable: ${(error as Error).message}`,
      { cause: error }
    )
  }
  if (response.status < 200 || response.status >= 300) await failure(call, response)
  return response
}

function broken(call: ProviderCall, error: unknown): Error {
  if (call.signal?.aborted || error instanceof ProviderError) return error as Error
  if (error instanceof CompletionStreamError) {
    return new ProviderError(`${providerLabel(call.provider)} failed: ${error.message}`)
  }
  return new ProviderError(
    `${providerLabel(call.provider)} broke off: ${(error as Error).message}`,
    { cause: error }
  )
}

async function openAiCompatible(call: ProviderCall): Promise<ModelReply> {
  const base = chatConfig.providerEndpoints[call.provider as 'openai' | 'openrouter']
  const headers: Record<string, string> = { authorization: `Bearer ${call.apiKey}` }
  if (call.provider === 'openrouter') headers['x-title'] = 'Agent Host'
  const stream = Boolean(call.onToken)
  const response = await send(call, `${base}/chat/completions`, headers, {
    model: call.model,
    messages: call.messages,
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  })
  try {
    if (!stream) {
      const body = await response.json()
      const content = body?.choices?.[0]?.message?.content
      if (typeof content !== 'string') {
        throw new ProviderError(`${providerLabel(call.provider)} answered without content`)
      }
      return { content, model: String(body.model ?? call.model), usage: openAiUsage(body) }
    }
    response.streaming()
    const deltas = completionDeltas(response.body, call.model)
    let step = await deltas.next()
    for (; !step.done; step = await deltas.next()) call.onToken!(step.value)
    const { content, model, usage, done } = step.value
    if (!done) throw new ProviderError(`${providerLabel(call.provider)} ended the stream early`)
    return { content, model, usage }
  } catch (error) {
    throw broken(call, error)
  }
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

async function anthropic(call: ProviderCall): Promise<ModelReply> {
  const { system, messages } = anthropicMessages(call.messages)
  const stream = Boolean(call.onToken)
  const response = await send(
    call,
    `${chatConfig.providerEndpoints.anthropic}/messages`,
    { 'x-api-key': call.apiKey, 'anthropic-version': ANTHROPIC_VERSION },
    {
      model: call.model,
      max_tokens: ANTHROPIC_MAX_TOKENS,
      ...(system ? { system } : {}),
      messages,
      stream,
    }
  )
  try {
    if (!stream) {
      const body = await response.json()
      if (!Array.isArray(body?.content)) {
        throw new ProviderError('Anthropic answered without content')
      }
      const content = body.content
        .filter((block: any) => block?.type === 'text' && typeof block.text === 'string')
        .map((block: any) => block.text)
        .join('')
      return {
        content,
        model: String(body.model ?? call.model),
        usage: openAiUsage(body),
      }
    }
    response.streaming()
    let content = ''
    let model = call.model
    let inputTokens = 0
    let outputTokens = 0
    let stopped = false
    for await (const { event, data } of sseEvents(response.body)) {
      let payload: any
      try {
        payload = JSON.parse(data)
      } catch {
        continue
      }
      const type = payload?.type ?? event
      if (type === 'error') {
        throw new ProviderError(
          `Anthropic failed: ${payload?.error?.message ?? payload?.error?.type ?? 'stream error'}`
        )
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
    if (!stopped) throw new ProviderError('Anthropic ended the stream early')
    return { content, model, usage: { inputTokens, outputTokens } }
  } catch (error) {
    throw broken(call, error)
  }
}

export function customerProviderChat(call: ProviderCall): Promise<ModelReply> {
  return call.provider === 'anthropic' ? anthropic(call) : openAiCompatible(call)
}
