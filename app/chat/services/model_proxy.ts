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
import { hostedProviderName, resolveHostedModel } from '#chat/services/hosted_models'
import { maxOutputTokens, setOutputLimit, upstreamBody } from '#chat/services/upstream_body'
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
