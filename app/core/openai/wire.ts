/**
 * The OpenAI chat-completions wire format, read once for every client of
 * it: the hosted model proxy's upstream, customers' own providers and the
 * agents' containers. One SSE parser, one usage parser and one reader of a
 * completion stream, so a fix to any of them reaches every path.
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

/**
 * Reads a chat-completions stream: yields each content delta, returns the
 * whole reply once the body ends. An `error` chunk throws CompletionStreamError; chunks that
 * are not JSON are skipped.
 */
export async function* completionDeltas(
  body: AsyncIterable<Uint8Array | string>,
  requestedModel: string
): AsyncGenerator<string, StreamedCompletion> {
  let content = ''
  let model = requestedModel
  let usage: TokenUsage | null = null
  let done = false
  for await (const { data } of sseEvents(body)) {
    // Read on to the end after [DONE]: a body read whole keeps its keep-alive connection.
    if (done) continue
    if (data === '[DONE]') {
      done = true
      continue
    }
    let chunk: any
    try {
      chunk = JSON.parse(data)
    } catch {
      continue
    }
    if (chunk?.error) {
      throw new CompletionStreamError(chunk.error.message ?? JSON.stringify(chunk.error))
    }
    if (typeof chunk?.model === 'string') model = chunk.model
    usage = openAiUsage(chunk) ?? usage
    const token = chunk?.choices?.[0]?.delta?.content
    if (typeof token === 'string' && token.length > 0) {
      content += token
      yield token
    }
  }
  return { content, model, usage, done }
}
