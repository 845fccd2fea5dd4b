import { upstreamRequest, type UpstreamResponse } from '#core/openai/upstream_http'
import {
  readFailure,
  upstreamFailure,
  type UpstreamFailure,
  type UpstreamParty,
} from '#core/openai/gateway_errors'
import {
  completionChunks,
  emptyCompletion,
  openAiUsage,
  sseData,
  sseEvents,
  upstreamMessage,
  type CompletionChunk,
  type SseEvent,
  type StreamedCompletion,
  type TokenUsage,
} from '#core/openai/wire'

/**
 * The only client of OpenAI-compatible model upstreams: the hosted model
 * proxy's provider, customers' own providers and the agents' frameworks in
 * their containers all go through it. It owns the request (one keep-alive
 * HTTP client: upstream_http.ts), reading a whole or a streamed completion
 * (wire.ts: one SSE parser, one usage parser, one stream reader) and the
 * one mapping of every failure (no answer, an error status, a body that is
 * no completion, an error inside the stream, a stream that breaks off, stalls
 * or ends early) to the service's errors (gateway_errors.ts). Callers say
 * where (an endpoint) and what (a body); the wire format stays here.
 */

/** Where one upstream answers, how it is named, how long it may take. */
export interface ModelEndpoint {
  /** The full URL (`.../chat/completions`, Anthropic's `.../messages`). */
  url: string
  headers?: Record<string, string>
  party: UpstreamParty
  /** Longest wait for the answer to start (and, not streamed, for all of it). */
  timeoutMs: number
  /** Longest silence within a stream (default `timeoutMs`). */
  idleTimeoutMs?: number
}

/** A whole (non-streamed) completion. */
export interface Completion {
  /** The answer as the upstream sent it (the model proxy relays it). */
  json: any
  /** The first choice's text; null when it has none (a tool call). */
  content: string | null
  /** The model the answer names, else the one asked for. */
  model: string
  usage: TokenUsage | null
}

/** An upstream's 2xx answer, opened: its body read with the gateway's failure mapping. */
export class GatewayAnswer {
  constructor(
    private readonly response: UpstreamResponse,
    private readonly party: UpstreamParty,
    private readonly signal?: AbortSignal
  ) {}

  /** The whole body as JSON (undefined when it is not JSON). */
  async json(): Promise<any> {
    try {
      return await this.response.json()
    } catch (error) {
      throw readFailure(this.party, error, this.signal)
    }
  }

  /** The raw SSE data payloads (failures unmapped: the stream reader maps them). */
  data(): AsyncGenerator<string> {
    return sseData(this.response.body)
  }

  /** The SSE events, for a provider with its own stream events (Anthropic). */
  async *events(): AsyncGenerator<SseEvent> {
    try {
      yield* sseEvents(this.response.body)
    } catch (error) {
      throw readFailure(this.party, error, this.signal)
    }
  }
}

export class ModelGateway {
  /**
   * Sends `body` (POST) and opens the answer: no answer is `unavailable`,
   * a non-2xx answer is `status` with what its body says. A stream's
   * whole-answer timeout becomes the idle one once its headers arrive.
   */
  async open(
    endpoint: ModelEndpoint,
    body: Record<string, unknown>,
    options: { stream: boolean; signal?: AbortSignal }
  ): Promise<GatewayAnswer> {
    const response = await this.#send(endpoint, {
      body,
      accept: options.stream ? 'text/event-stream' : 'application/json',
      signal: options.signal,
    })
    if (options.stream) response.streaming()
    return new GatewayAnswer(response, endpoint.party, options.signal)
  }

  /**
   * A whole chat completion (`stream: false` in `body`). An answer without
   * `choices` is `reported` when it carries an error, else `unreadable`;
   * with `requireContent`, so is one whose first choice has no text.
   */
  async complete(
    endpoint: ModelEndpoint,
    body: Record<string, unknown>,
    options: { signal?: AbortSignal; requireContent?: boolean } = {}
  ): Promise<Completion> {
    const answer = await this.open(endpoint, body, { stream: false, signal: options.signal })
    const json = await answer.json()
    if (!json || typeof json !== 'object' || !Array.isArray(json.choices)) {
      throw this.failure(
        endpoint.party,
        json?.error
          ? { kind: 'reported', detail: upstreamMessage(json, '') }
          : { kind: 'unreadable', detail: 'no choices' }
      )
    }
    const text = json.choices[0]?.message?.content
    const content = typeof text === 'string' ? text : null
    if (content === null && options.requireContent) {
      throw this.failure(endpoint.party, { kind: 'unreadable', detail: 'no content' })
    }
    const requested = String(body.model ?? '')
    return {
      json,
      content,
      model: typeof json.model === 'string' ? json.model : requested,
      usage: openAiUsage(json),
    }
  }

  /**
   * A streamed chat completion (`stream: true` in `body`), opened: its
   * failures to answer are those of `open`, thrown here, before anything
   * is read. The reader it resolves to yields each chunk, keeps `reply` up
   * to date (pass one to keep what was generated when the stream fails or
   * the consumer stops early) and returns it once the stream ends with
   * `[DONE]`; an error chunk is `reported`, a broken or stalled connection
   * `broke_off`, an end without `[DONE]` `cut_short`. The caller's abort
   * is rethrown as it is.
   */
  async stream(
    endpoint: ModelEndpoint,
    body: Record<string, unknown>,
    options: { signal?: AbortSignal; reply?: StreamedCompletion } = {}
  ): Promise<AsyncGenerator<CompletionChunk, StreamedCompletion>> {
    const answer = await this.open(endpoint, body, { stream: true, signal: options.signal })
    return this.#read(
      answer,
      endpoint.party,
      options.reply ?? emptyCompletion(String(body.model ?? '')),
      options.signal
    )
  }

  async *#read(
    answer: GatewayAnswer,
    party: UpstreamParty,
    reply: StreamedCompletion,
    signal?: AbortSignal
  ): AsyncGenerator<CompletionChunk, StreamedCompletion> {
    try {
      yield* completionChunks(answer.data(), reply)
    } catch (error) {
      throw readFailure(party, error, signal)
    }
    if (!reply.done && !signal?.aborted) throw this.failure(party, { kind: 'cut_short' })
    return reply
  }

  /** The upstream's model list (`GET .../models`: its `data`). */
  async models(endpoint: ModelEndpoint): Promise<unknown[]> {
    const response = await this.#send(endpoint, { accept: 'application/json' })
    const listed = await new GatewayAnswer(response, endpoint.party).json()
    if (!Array.isArray(listed?.data)) {
      throw this.failure(endpoint.party, { kind: 'unreadable', detail: 'no data' })
    }
    return listed.data
  }

  /** The service's error for a failure a caller finds in a provider's own format (Anthropic's). */
  failure(party: UpstreamParty, failure: UpstreamFailure) {
    return upstreamFailure(party, failure)
  }

  async #send(
    endpoint: ModelEndpoint,
    request: { body?: Record<string, unknown>; accept: string; signal?: AbortSignal }
  ): Promise<UpstreamResponse> {
    const { party } = endpoint
    let response: UpstreamResponse
    try {
      response = await upstreamRequest(endpoint.url, {
        method: request.body ? 'POST' : 'GET',
        body: request.body,
        headers: { accept: request.accept, ...endpoint.headers },
        signal: request.signal,
        timeoutMs: endpoint.timeoutMs,
        idleTimeoutMs: endpoint.idleTimeoutMs,
      })
    } catch (error) {
      if (request.signal?.aborted) throw error
      throw upstreamFailure(party, { kind: 'unavailable', detail: (error as Error).message }, error)
    }
    if (response.status >= 200 && response.status < 300) return response
    const raw = await response.text().catch(() => '')
    let parsed: unknown
    try {
      parsed = JSON.parse(raw)
    } catch {}
    throw upstreamFailure(party, {
      kind: 'status',
      status: response.status,
      detail: upstreamMessage(parsed, raw),
    })
  }
}

/** The one gateway (its HTTP client keeps connections alive across calls). */
export const modelGateway = new ModelGateway()
