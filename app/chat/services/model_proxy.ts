import { LOCAL_DEV_MODEL, modelProxyConfig } from '#config/model_proxy'
import {
  InsufficientCreditsException,
  ServiceUnavailableException,
  ValidationException,
} from '#core/exceptions/api_exceptions'
import creditLedger from '#credits/services/credit_ledger'
import {
  releaseHold,
  reserveCredits,
  settleHold,
  type CreditHold,
} from '#credits/services/credit_holds'
import { alertBudgetRefusal, BudgetExceededException } from '#credits/services/credit_budgets'
import { localDevChunks, localDevCompletion } from '#chat/services/local_dev_model'
import {
  creditsFor,
  estimateTokens,
  promptTokensUpperBound,
  rateFor,
  type TokenUsage,
} from '#chat/services/metering'
import { openAiUsage, sseEvents } from '#core/openai/wire'
import { upstreamRequest, type UpstreamResponse } from '#core/openai/upstream_http'
import type { ModelReply } from '#chat/services/types'

/**
 * The hosted model path, metered in AI Credits: the `/v1/chat/completions`
 * route (containers' and API-key users' model calls) and the chat
 * service's hosted fallback all come here. Each request: resolve the model
 * -> build the body to forward and hold its worst-case cost (402
 * INSUFFICIENT_CREDITS before the upstream is called) -> forward exactly
 * that body to MODEL_API_URL (or answer with the built-in `local-dev`
 * model) -> read the usage -> settle: return the hold, debit the real cost
 * (at most the hold) in one ledger entry (`kind: 'llm'`; none when free).
 */
export interface HostedOptions {
  /** Whose credits pay (the agent's owner, the test-chat user, the API key's user). */
  payerId: string
  agentId?: string | null
  /** The user's API key, when the user called the proxy with one (no agent). */
  apiKeyId?: string | null
  source: string
  signal?: AbortSignal
}

/** The upstream sent an error inside a stream, or a stream broke off. */
export class UpstreamStreamError extends ServiceUnavailableException {}

/**
 * Whether requests may name this model upstream (`modelAllowlist` in
 * config/model_proxy.ts). Without MODEL_ALLOWLIST: MODEL_NAME, and a model
 * of the rate table by its own name, with a `vendor/` prefix or as a dated
 * snapshot (`gpt-4o-mini`, `openai/gpt-4o-mini`, `gpt-4o-mini-2024-07-18`),
 * never a longer name that merely starts like one (`gpt-5-pro` is not
 * `gpt-5`: it costs several times more).
 */
export function isModelOffered(model: string): boolean {
  const { modelAllowlist, upstream, rates } = modelProxyConfig
  if (modelAllowlist) return modelAllowlist.includes('*') || modelAllowlist.includes(model)
  if (model === upstream.defaultModel) return true
  const name = model.toLowerCase()
  const bare = name.slice(name.lastIndexOf('/') + 1)
  const snapshot = bare.replace(/-(\d{4}-\d{2}-\d{2}|\d{8})$/, '')
  return Object.hasOwn(rates, name) || Object.hasOwn(rates, bare) || Object.hasOwn(rates, snapshot)
}

/** The model names a refusal suggests. */
function offeredModelNames(): string[] {
  const { modelAllowlist, upstream, rates } = modelProxyConfig
  const names = modelAllowlist ?? [
    ...(upstream.defaultModel ? [upstream.defaultModel] : []),
    ...Object.keys(rates),
  ]
  return [...new Set([...names, LOCAL_DEV_MODEL])]
}

/**
 * The model a request is answered by (`local-dev` without an upstream).
 * A model that is not offered is refused here, before any credits are
 * held: without an upstream too, so `local-dev` never answers for a name
 * the service would refuse once MODEL_API_URL is set.
 */
export function resolveHostedModel(requested: unknown): { model: string; local: boolean } {
  const upstream = modelProxyConfig.upstream
  const named = typeof requested === 'string' && requested.trim() ? requested.trim() : null
  if (named === LOCAL_DEV_MODEL) return { model: LOCAL_DEV_MODEL, local: true }
  if (named && !isModelOffered(named)) {
    throw new ValidationException(
      `model: "${named.slice(0, 100)}" is not offered here; use one of: ${offeredModelNames().join(', ')}`
    )
  }
  if (!upstream.url) return { model: LOCAL_DEV_MODEL, local: true }
  const model = named ?? upstream.defaultModel
  if (!model) {
    throw new ValidationException('model: none named, and MODEL_NAME is not set')
  }
  return { model, local: false }
}

const KNOWN_PROVIDERS: [RegExp, string][] = [
  [/(^|\.)openai\.com$/, 'openai'],
  [/(^|\.)openrouter\.ai$/, 'openrouter'],
  [/(^|\.)anthropic\.com$/, 'anthropic'],
  [/(^|\.)groq\.com$/, 'groq'],
  [/(^|\.)together\.(ai|xyz)$/, 'together'],
  [/(^|\.)mistral\.ai$/, 'mistral'],
]

let providerCache: { url: string; name: string } | undefined

/** The usage-history `provider` of hosted calls: a known vendor's name, else the upstream's host. */
export function hostedProviderName(local: boolean): string {
  if (local) return LOCAL_DEV_MODEL
  const url = modelProxyConfig.upstream.url ?? ''
  if (providerCache?.url === url) return providerCache.name
  let host = 'hosted'
  try {
    host = new URL(url).hostname
  } catch {}
  const name = KNOWN_PROVIDERS.find(([pattern]) => pattern.test(host))?.[1] ?? host
  providerCache = { url, name }
  return name
}

/**
 * The most output tokens a request may produce, and what its hold covers:
 * the largest limit the client named in either field (a small one in one
 * field cannot hide a large one in the other), else the default reserve.
 */
function maxOutputTokens(body: Record<string, any>): number {
  const named = [body.max_completion_tokens, body.max_tokens]
    .map(Number)
    .filter((value) => Number.isSafeInteger(value) && value > 0)
  return named.length > 0 ? Math.max(...named) : modelProxyConfig.reserveOutputTokens
}

/**
 * Request fields forwarded upstream: generation settings only. Anything
 * else (`n`, `best_of`, provider-specific extras) never reaches the
 * provider. Whatever is forwarded is priced: the hold covers the bytes of
 * the whole forwarded body (promptTokensUpperBound).
 */
const FORWARDED_FIELDS = [
  'messages',
  'temperature',
  'top_p',
  'stop',
  'presence_penalty',
  'frequency_penalty',
  'seed',
  'response_format',
  'tools',
  'tool_choice',
  'functions',
  'function_call',
  'parallel_tool_calls',
  'user',
  'logit_bias',
  'logprobs',
  'top_logprobs',
] as const

/** The body sent upstream: forwarded fields, the model, one output limit, stream settings. */
function upstreamBody(
  body: Record<string, any>,
  model: string,
  limit: number,
  stream: boolean
): Record<string, any> {
  if (body.n !== undefined && body.n !== null && Number(body.n) !== 1) {
    throw new ValidationException('"n" must be 1: one completion per request')
  }
  const request: Record<string, any> = { model }
  for (const field of FORWARDED_FIELDS) if (body[field] !== undefined) request[field] = body[field]
  setOutputLimit(request, body, limit)
  request.stream = stream
  if (stream) request.stream_options = { include_usage: true }
  return request
}

/** One limit field, the one the client used (providers differ in which they take). */
function setOutputLimit(request: Record<string, any>, body: Record<string, any>, limit: number) {
  if (body.max_completion_tokens !== undefined) request.max_completion_tokens = limit
  else request.max_tokens = limit
}

/** The fewest output tokens a request is still sent with when the balance cannot hold what it asked. */
const MIN_FITTED_OUTPUT_TOKENS = 256

/**
 * Builds the exact body that goes upstream and holds credits for its worst
 * case: every byte of it as a prompt token (promptTokensUpperBound: tools,
 * schemas and any other forwarded field count like messages) plus its
 * output limit. A request asking more output than the balance (or what a
 * monthly budget leaves) covers (framework agents ask for 64k tokens by
 * default: Hermes sends max_tokens 65536) is held for, and sent with, the
 * largest limit that is covered, when that is at least
 * MIN_FITTED_OUTPUT_TOKENS; below that (a huge prompt included) it is
 * refused with 402, and a budget's refusal alerts its owner (100 %). The
 * body returned is the one priced: nothing is forwarded that was not held for.
 */
async function holdFor(
  options: HostedOptions,
  model: string,
  body: Record<string, any>,
  stream: boolean
): Promise<{ hold: CreditHold; request: Record<string, any> }> {
  const asked = maxOutputTokens(body)
  const request = upstreamBody(body, model, asked, stream)
  const inputTokens = promptTokensUpperBound(request)
  const hold = (outputTokens: number) =>
    reserveCredits(options.payerId, creditsFor(model, { inputTokens, outputTokens }), {
      agentId: options.agentId,
    })
  try {
    try {
      return { hold: await hold(asked), request }
    } catch (error) {
      if (!(error instanceof InsufficientCreditsException)) throw error
      const rate = rateFor(model)
      const balance = await creditLedger.balanceOf(options.payerId)
      const available =
        error instanceof BudgetExceededException
          ? Math.min(balance, error.refusal.remainingCredits)
          : balance
      const fitted =
        rate.output > 0
          ? Math.floor((available * 1_000_000 - inputTokens * rate.input) / rate.output)
          : 0
      if (fitted < MIN_FITTED_OUTPUT_TOKENS || fitted >= asked) throw error
      // A shorter limit only shortens the body, so the prompt bound still holds.
      setOutputLimit(request, body, fitted)
      return { hold: await hold(fitted), request }
    }
  } catch (error) {
    if (error instanceof BudgetExceededException) await alertBudgetRefusal(error.refusal)
    throw error
  }
}

function upstreamErrorMessage(body: any, raw: string): string {
  const message = body?.error?.message ?? body?.message ?? body?.error ?? raw
  return (typeof message === 'string' ? message : JSON.stringify(message)).slice(0, 300)
}

/** Calls MODEL_API_URL/chat/completions; non-2xx answers become API errors. */
async function callUpstream(body: Record<string, any>, signal?: AbortSignal) {
  const { url, apiKey } = modelProxyConfig.upstream
  let response: UpstreamResponse
  try {
    response = await upstreamRequest(`${url}/chat/completions`, {
      body,
      headers: {
        ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
        accept: body.stream ? 'text/event-stream' : 'application/json',
      },
      signal,
      timeoutMs: modelProxyConfig.timeoutMs,
      idleTimeoutMs: modelProxyConfig.streamIdleTimeoutMs,
    })
  } catch (error) {
    if (signal?.aborted) throw error
    throw new ServiceUnavailableException(
      `The model provider is unavailable: ${(error as Error).message}`,
      { cause: error }
    )
  }
  if (response.status >= 200 && response.status < 300) return response
  const raw = await response.text().catch(() => '')
  let parsed: any
  try {
    parsed = JSON.parse(raw)
  } catch {}
  const message = upstreamErrorMessage(parsed, raw)
  if ([400, 404, 413, 422].includes(response.status)) {
    throw new ValidationException(`The model provider refused the request: ${message}`)
  }
  throw new ServiceUnavailableException(
    `The model provider answered ${response.status}: ${message}`
  )
}

/** Usage when the provider reports none: the whole forwarded body is the prompt. */
function estimatedUsage(request: Record<string, any>, content: string): TokenUsage {
  return {
    inputTokens: estimateTokens(JSON.stringify(request)),
    outputTokens: estimateTokens(content),
  }
}

async function settle(
  hold: CreditHold,
  options: HostedOptions,
  local: boolean,
  model: string,
  usage: TokenUsage,
  extra: Record<string, unknown> = {}
): Promise<number> {
  // Never more than was held: the hold covered the worst case of the body
  // that was forwarded, so a larger reported cost is the provider's error.
  const cost = creditsFor(model, usage)
  const credits = Math.min(cost, hold.credits)
  return settleHold(hold, {
    provider: hostedProviderName(local),
    model,
    usage,
    credits,
    metadata: {
      source: options.source,
      agentId: options.agentId ?? null,
      ...(options.apiKeyId ? { apiKeyId: options.apiKeyId } : {}),
      ...(cost > credits ? { uncoveredCredits: cost - credits } : {}),
      ...extra,
    },
  })
}

function contentOf(json: any): string {
  const content = json?.choices?.[0]?.message?.content
  return typeof content === 'string' ? content : ''
}

/**
 * A whole (non-streamed) hosted completion: the upstream's answer and the
 * settlement of its cost, already under way (`settled`: the credits
 * debited). Callers await `settled` before answering; the chat service
 * does so alongside storing the exchange.
 */
export async function hostedCompletion(
  body: Record<string, any>,
  options: HostedOptions
): Promise<{ json: any; reply: ModelReply; settled: Promise<number> }> {
  const { model, local } = resolveHostedModel(body.model)
  const { hold, request } = await holdFor(options, model, body, false)
  let json: any
  try {
    if (local) {
      json = localDevCompletion(body.messages)
    } else {
      const response = await callUpstream(request, options.signal)
      json = await response.json().catch((error) => {
        throw options.signal?.aborted
          ? error
          : new ServiceUnavailableException(`The model provider broke off: ${error.message}`)
      })
      if (!json || typeof json !== 'object' || !Array.isArray(json.choices)) {
        throw new ServiceUnavailableException('The model provider answered something unreadable')
      }
    }
  } catch (error) {
    await releaseHold(hold)
    throw error
  }
  const answered = local ? LOCAL_DEV_MODEL : typeof json.model === 'string' ? json.model : model
  const content = contentOf(json)
  const usage = openAiUsage(json) ?? estimatedUsage(request, content)
  const settled = settle(hold, options, local, answered, usage)
  // Awaited by the caller; this only keeps a failure from being "unhandled" meanwhile.
  settled.catch(() => {})
  return { json, reply: { content, model: answered, usage }, settled }
}

export interface HostedChunk {
  /** The SSE data payload as the upstream sent it. */
  data: string
  json: any
  /** The content delta, when this chunk carries one. */
  token: string | null
  /** The usage-only chunk that `stream_options.include_usage` adds (no choices). */
  usageOnly: boolean
}

/**
 * A streamed hosted completion whose credits are held. Iterate `chunks()`;
 * whatever happens (end, error, the consumer stopping, the signal) the
 * hold is settled once: with the reported usage, or, when the stream was
 * cut short, with what was generated until then. Call `close()` in a
 * `finally` as well, in case `chunks()` is never iterated.
 */
export class HostedStream {
  content = ''
  model: string
  usage: TokenUsage | null = null
  completed = false
  #settlement?: Promise<number>

  constructor(
    private readonly hold: CreditHold,
    private readonly body: Record<string, any>,
    private readonly options: HostedOptions,
    private readonly local: boolean,
    private readonly source: AsyncIterable<string>
  ) {
    this.model = body.model
  }

  async *chunks(): AsyncGenerator<HostedChunk, ModelReply> {
    try {
      for await (const data of this.source) {
        if (data === '[DONE]') {
          // Read on to the end of the body so the connection can be reused.
          this.completed = true
          continue
        }
        if (this.completed) continue
        let json: any
        try {
          json = JSON.parse(data)
        } catch {
          continue
        }
        if (json?.error) {
          throw new UpstreamStreamError(
            `The model provider failed: ${upstreamErrorMessage(json, data)}`
          )
        }
        if (typeof json?.model === 'string' && !this.local) this.model = json.model
        this.usage = openAiUsage(json) ?? this.usage
        const delta = json?.choices?.[0]?.delta?.content
        const token = typeof delta === 'string' && delta.length > 0 ? delta : null
        if (token) this.content += token
        yield {
          data,
          json,
          token,
          usageOnly: Array.isArray(json?.choices) && json.choices.length === 0,
        }
      }
      if (!this.completed && !this.options.signal?.aborted) {
        throw new UpstreamStreamError('The model provider ended the stream early')
      }
    } catch (error) {
      if (this.options.signal?.aborted || error instanceof UpstreamStreamError) throw error
      throw new UpstreamStreamError(`The model provider broke off: ${(error as Error).message}`)
    } finally {
      await this.close()
    }
    return { content: this.content, model: this.model, usage: this.usage }
  }

  /** Settles the hold (once): the reported usage, else what was generated so far. */
  close(): Promise<number> {
    this.#settlement ??= settle(
      this.hold,
      this.options,
      this.local,
      this.model,
      this.usage ?? estimatedUsage(this.body, this.content),
      this.completed ? {} : { cutShort: true }
    )
    return this.#settlement
  }
}

async function* upstreamData(response: UpstreamResponse): AsyncGenerator<string> {
  for await (const event of sseEvents(response.body)) yield event.data
}

async function* localData(messages: unknown): AsyncGenerator<string> {
  for (const chunk of localDevChunks(messages)) yield JSON.stringify(chunk)
  yield '[DONE]'
}

/**
 * Holds the credits and opens the upstream stream (402, 400 and 503 are
 * thrown here, before anything is sent to the client).
 */
export async function openHostedStream(
  body: Record<string, any>,
  options: HostedOptions
): Promise<HostedStream> {
  const { model, local } = resolveHostedModel(body.model)
  const { hold, request } = await holdFor(options, model, body, true)
  try {
    let source: AsyncIterable<string>
    if (local) {
      source = localData(body.messages)
    } else {
      const response = await callUpstream(request, options.signal)
      response.streaming()
      source = upstreamData(response)
    }
    return new HostedStream(hold, request, options, local, source)
  } catch (error) {
    await releaseHold(hold)
    throw error
  }
}
