import { LOCAL_DEV_MODEL, modelProxyConfig } from '#config/model_proxy'
import { InsufficientCreditsException } from '#core/exceptions/api_exceptions'
import creditLedger from '#credits/services/credit_ledger'
import {
  holdInTurn,
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
import {
  completionChunks,
  emptyCompletion,
  openAiUsage,
  type CompletionChunk,
  type StreamedCompletion,
} from '#core/openai/wire'
import { modelGateway, type Completion, type ModelEndpoint } from '#core/openai/model_gateway'
import type { ModelReply } from '#chat/services/types'
import { accountKey, afterReply } from '#core/http/after_reply'

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
  /**
   * The agent has no monthly budget of its own (its config says so): with
   * no agent, or this, an all-but-sure hold lets the model be asked
   * alongside it (heldCall). An agent budget's refusal never reaches the model.
   */
  agentUnbudgeted?: boolean
}

/** The fewest output tokens a request is still sent with when the balance cannot hold what it asked. */
const MIN_FITTED_OUTPUT_TOKENS = 256

/** The body to forward as first planned, and the credits its worst case costs. */
interface PlannedRequest {
  request: Record<string, any>
  asked: number
  inputTokens: number
  credits: number
}

function planRequest(model: string, body: Record<string, any>, stream: boolean): PlannedRequest {
  const asked = maxOutputTokens(body)
  const request = upstreamBody(body, model, asked, stream)
  const inputTokens = promptTokensUpperBound(request)
  return {
    request,
    asked,
    inputTokens,
    credits: creditsFor(model, { inputTokens, outputTokens: asked }),
  }
}

/**
 * Holds credits for the worst case of the body planned to go upstream:
 * every byte of it as a prompt token (promptTokensUpperBound: tools,
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
  { request, asked, inputTokens }: PlannedRequest
): Promise<{ hold: CreditHold; request: Record<string, any>; fitted: boolean }> {
  const reserve = (outputTokens: number) =>
    reserveCredits(options.payerId, creditsFor(model, { inputTokens, outputTokens }), {
      agentId: options.agentId,
    })
  // A settlement still finishing after its answer gives back the rest of its hold: once it
  // has, the balance is what this hold must be measured against (after_reply.ts).
  const hold = async (outputTokens: number) => {
    try {
      return await reserve(outputTokens)
    } catch (error) {
      const settling = afterReply.pending(accountKey(options.payerId))
      if (!(error instanceof InsufficientCreditsException) || !settling) throw error
      await settling
      return reserve(outputTokens)
    }
  }
  try {
    try {
      return { hold: await hold(asked), request, fitted: false }
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
      return { hold: await hold(fitted), request, fitted: true }
    }
  } catch (error) {
    if (error instanceof BudgetExceededException) await alertBudgetRefusal(error.refusal)
    throw error
  }
}

/**
 * Holds the credits and makes the upstream call with the body held for.
 * When the hold is all but sure (holdInTurn) the call starts alongside
 * it rather than after it: one database round trip off the answer's path.
 * Nothing of that early call is used before the hold is taken; a refused
 * hold cancels it, and a hold that had to shorten the output limit cancels
 * it and calls again with the shorter body. A failed call gives the hold back.
 */
async function heldCall<T>(
  options: HostedOptions,
  model: string,
  body: Record<string, any>,
  stream: boolean,
  call: (request: Record<string, any>, signal: AbortSignal | undefined) => Promise<T>
): Promise<{ hold: CreditHold; request: Record<string, any>; result: T }> {
  const planned = planRequest(model, body, stream)
  let early: { result: Promise<T>; cancel: AbortController } | undefined
  const noAgentBudget = !options.agentId || options.agentUnbudgeted === true
  let held: Awaited<ReturnType<typeof holdFor>>
  try {
    held = await holdInTurn(options.payerId, planned.credits, noAgentBudget, (allButSure) => {
      if (allButSure) {
        const cancel = new AbortController()
        const signal = options.signal
          ? AbortSignal.any([options.signal, cancel.signal])
          : cancel.signal
        // A copy: a fitted hold shortens the planned body.
        early = { result: call({ ...planned.request }, signal), cancel }
        early.result.catch(() => {})
      }
      return holdFor(options, model, body, planned)
    })
  } catch (error) {
    early?.cancel.abort()
    throw error
  }
  try {
    if (early && held.fitted) early.cancel.abort()
    const result =
      early && !held.fitted ? await early.result : await call(held.request, options.signal)
    return { hold: held.hold, request: held.request, result }
  } catch (error) {
    await releaseHold(held.hold)
    throw error
  }
}

/**
 * MODEL_API_URL's completions endpoint. It gets the client's own fields
 * (upstream_body.ts), so its refusal of them is the client's 400.
 */
function hostedEndpoint(): ModelEndpoint {
  const { url, apiKey } = modelProxyConfig.upstream
  return {
    url: `${url}/chat/completions`,
    headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
    party: { name: 'The model provider', clientBody: true },
    timeoutMs: modelProxyConfig.timeoutMs,
    idleTimeoutMs: modelProxyConfig.streamIdleTimeoutMs,
  }
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
  const {
    hold,
    request,
    result: completion,
  } = await heldCall(options, model, body, false, async (forwarded, signal) =>
    local
      ? localCompletion(body.messages)
      : modelGateway.complete(hostedEndpoint(), forwarded, { signal })
  )
  const { json } = completion
  const answered = local ? LOCAL_DEV_MODEL : completion.model
  const content = completion.content ?? ''
  const usage = completion.usage ?? estimatedUsage(request, content)
  const settled = settle(hold, options, local, answered, usage)
  // Awaited by the caller; this only keeps a failure from being "unhandled" meanwhile.
  settled.catch(() => {})
  return { json, reply: { content, model: answered, usage }, settled }
}

/**
 * A streamed hosted completion whose credits are held. Iterate `chunks()`;
 * whatever happens (end, error, the consumer stopping, the signal) the
 * hold is settled once: with the reported usage, or, when the stream was
 * cut short, with what was generated until then. Call `close()` in a
 * `finally` as well, in case `chunks()` is never iterated.
 */
export class HostedStream {
  #settlement?: Promise<number>

  constructor(
    private readonly hold: CreditHold,
    private readonly body: Record<string, any>,
    private readonly options: HostedOptions,
    private readonly local: boolean,
    /** What was generated so far (kept up to date by `source`). */
    private readonly reply: StreamedCompletion,
    private readonly source: AsyncGenerator<CompletionChunk, StreamedCompletion>
  ) {}

  get content(): string {
    return this.reply.content
  }

  get model(): string {
    return this.reply.model
  }

  get usage(): TokenUsage | null {
    return this.reply.usage
  }

  get completed(): boolean {
    return this.reply.done
  }

  async *chunks(): AsyncGenerator<CompletionChunk, ModelReply> {
    try {
      yield* this.source
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

/** The built-in local-dev model's whole answer, read as an upstream's would be. */
function localCompletion(messages: unknown): Completion {
  const json = localDevCompletion(messages)
  return {
    json,
    content: json.choices[0].message.content,
    model: LOCAL_DEV_MODEL,
    usage: openAiUsage(json),
  }
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
  const { hold, request, result } = await heldCall(
    options,
    model,
    body,
    true,
    async (forwarded, signal) => {
      const reply = emptyCompletion(forwarded.model)
      const source = local
        ? completionChunks(localData(body.messages), reply)
        : await modelGateway.stream(hostedEndpoint(), forwarded, { signal, reply })
      return { reply, source }
    }
  )
  return new HostedStream(hold, request, options, local, result.reply, result.source)
}
