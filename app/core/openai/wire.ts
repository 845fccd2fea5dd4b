/**
 * The OpenAI chat-completions wire format, read once for every client of
 * it (the model gateway, model_gateway.ts: the hosted model proxy's
 * upstream, customers' own providers and the agents' containers). One SSE
 * parser, one usage parser and one reader of a completion stream, so a fix
 * to any of them reaches every path.
 */

export interface TokenUsage {
  inputTokens: number
  outputTokens: number
}

export interface SseEvent {
  /** The `event:` name, when the server sent one (Anthropic does). */
  event: string | null
  /** The joined `data:` lines. */
  data: string
}

/**
 * Splits an SSE byte stream into events (comments and empty events are
 * skipped). Bytes are decoded as a stream, so a character split across
 * two chunks stays whole.
 */
export async function* sseEvents(
  body: AsyncIterable<Uint8Array | string>
): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder()
  let buffer = ''
  for await (const chunk of body) {
    buffer += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true })
    if (buffer.includes('\r')) {
      // A CR that ends the chunk may be half of a CRLF: it waits for the next chunk.
      const held = buffer.endsWith('\r') ? 1 : 0
      buffer = buffer.slice(0, buffer.length - held).replace(/\r\n?/g, '\n') + (held ? '\r' : '')
    }
    let boundary: number
    while ((boundary = buffer.indexOf('\n\n')) >= 0) {
      const parsed = parseEvent(buffer.slice(0, boundary))
      buffer = buffer.slice(boundary + 2)
      if (parsed) yield parsed
    }
  }
  buffer += decoder.decode()
  const rest = parseEvent(buffer.replace(/\r\n?/g, '\n'))
  if (rest) yield rest
}

function parseEvent(block: string): SseEvent | null {
  let event: string | null = null
  const data: string[] = []
  for (const line of block.split('\n')) {
    if (line.startsWith('data:')) data.push(line.slice(line.startsWith('data: ') ? 6 : 5))
    else if (line.startsWith('event:')) event = line.slice(6).trim()
  }
  return data.length > 0 ? { event, data: data.join('\n') } : null
}

/** The usage an OpenAI-compatible answer (or stream chunk) reports, or null. */
export function openAiUsage(body: any): TokenUsage | null {
  const usage = body?.usage
  if (!usage || typeof usage !== 'object') return null
  const input = Number(usage.prompt_tokens ?? usage.input_tokens)
  const output = Number(usage.completion_tokens ?? usage.output_tokens)
  if (!Number.isFinite(input) || !Number.isFinite(output)) return null
  return {
    inputTokens: Math.max(0, Math.round(input)),
    outputTokens: Math.max(0, Math.round(output)),
  }
}

/**
 * What an error answer says (`{ error: { message } }`, `{ message }`,
 * `{ error: "..." }`), else its raw text; at most 300 characters.
 */
export function upstreamMessage(body: any, raw: string): string {
  const message = body?.error?.message ?? body?.message ?? body?.error ?? raw
  return (typeof message === 'string' ? message : JSON.stringify(message)).slice(0, 300)
}

/** A completion stream carried an `error` object; its message as sent. */
export class CompletionStreamError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'CompletionStreamError'
  }
}

export interface StreamedCompletion {
  content: string
  /** The model the stream named (else the one asked for). */
  model: string
  usage: TokenUsage | null
  /** It ended with `[DONE]` (a stream without it was cut short). */
  done: boolean
}

/** A reply before its first chunk: nothing generated, the model asked for. */
export function emptyCompletion(requestedModel: string): StreamedCompletion {
  return { content: '', model: requestedModel, usage: null, done: false }
}

export interface CompletionChunk {
  /** The SSE data payload as sent (the model proxy relays it unchanged). */
  data: string
  json: any
  /** The content delta, when this chunk carries one. */
  token: string | null
  /** The usage-only chunk that `stream_options.include_usage` adds (no choices). */
  usageOnly: boolean
}

/**
 * Reads a chat-completions stream from its SSE data payloads: yields each
 * chunk and keeps `reply` up to date as they arrive (content so far, model,
 * usage, `[DONE]` seen), so a caller that stops early or is cut off still
 * knows what was generated; returns `reply` once the payloads end. An
 * `error` chunk throws CompletionStreamError; payloads that are not JSON
 * are skipped.
 */
export async function* completionChunks(
  data: AsyncIterable<string>,
  reply: StreamedCompletion
): AsyncGenerator<CompletionChunk, StreamedCompletion> {
  for await (const payload of data) {
    // Read on to the end after [DONE]: a body read whole keeps its keep-alive connection.
    if (reply.done) continue
    if (payload === '[DONE]') {
      reply.done = true
      continue
    }
    let json: any
    try {
      json = JSON.parse(payload)
    } catch {
      continue
    }
    if (json?.error) throw new CompletionStreamError(upstreamMessage(json, payload))
    if (typeof json?.model === 'string') reply.model = json.model
    reply.usage = openAiUsage(json) ?? reply.usage
    const delta = json?.choices?.[0]?.delta?.content
    const token = typeof delta === 'string' && delta.length > 0 ? delta : null
    if (token) reply.content += token
    yield {
      data: payload,
      json,
      token,
      usageOnly: Array.isArray(json?.choices) && json.choices.length === 0,
    }
  }
  return reply
}

/** The data payloads of an SSE byte stream. */
export async function* sseData(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<string> {
  for await (const event of sseEvents(body)) yield event.data
}
