import type { ContainerChatChunk, ContainerChatReply, ContainerChatRequest } from '#runtime/types'

/**
 * The agent's framework could not answer (unreachable, error status, error
 * inside the stream). The chat area falls back to the hosted path on it.
 */
export class ContainerChatError extends Error {
  constructor(
    message: string,
    readonly status?: number,
    options?: { cause?: unknown }
  ) {
    super(message, options)
    this.name = 'ContainerChatError'
  }
}

/** Where and how to reach one agent's OpenAI-compatible endpoint. */
export interface ChatTarget {
  url: string
  headers: Record<string, string>
  model: string
}

export interface ChatTimeouts {
  /** Longest wait for a whole non-streamed reply, or for a stream's first bytes. Default 300 s. */
  replyTimeoutMs?: number
}

function requestBody(target: ChatTarget, request: ContainerChatRequest, stream: boolean) {
  return JSON.stringify({
    model: target.model,
    messages: request.messages,
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
    // OpenAI `user`: frameworks derive a stable session from it.
    user: request.conversationId,
  })
}

async function post(
  target: ChatTarget,
  request: ContainerChatRequest,
  stream: boolean,
  timeoutMs: number
): Promise<{ response: Response; clear: () => void }> {
  const controller = new AbortController()
  const timer = setTimeout(
    () => controller.abort(new ContainerChatError(`no answer within ${timeoutMs}ms`)),
    timeoutMs
  )
  const onAbort = () => controller.abort(request.signal?.reason)
  request.signal?.addEventListener('abort', onAbort, { once: true })
  const clear = () => {
    clearTimeout(timer)
    request.signal?.removeEventListener('abort', onAbort)
  }
  let response: Response
  try {
    response = await fetch(target.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'accept': stream ? 'text/event-stream' : 'application/json',
        ...target.headers,
      },
      body: requestBody(target, request, stream),
      signal: controller.signal,
    })
  } catch (error) {
    clear()
    if (request.signal?.aborted) throw error
    throw new ContainerChatError(`agent unreachable: ${(error as Error).message}`, undefined, {
      cause: error,
    })
  }
  if (!response.ok) {
    const text = await response.text().catch(() => '')
    clear()
    throw new ContainerChatError(
      `agent answered ${response.status}: ${text.slice(0, 300)}`,
      response.status
    )
  }
  return { response, clear }
}

function usageOf(body: any): ContainerChatReply['usage'] {
  const usage = body?.usage
  if (!usage || typeof usage.total_tokens !== 'number') return undefined
  return {
    promptTokens: usage.prompt_tokens ?? 0,
    completionTokens: usage.completion_tokens ?? 0,
    totalTokens: usage.total_tokens,
  }
}

/** One whole reply (`stream: false`). */
export async function chatOnce(
  target: ChatTarget,
  request: ContainerChatRequest,
  timeouts: ChatTimeouts = {}
): Promise<ContainerChatReply> {
  const { response, clear } = await post(target, request, false, timeouts.replyTimeoutMs ?? 300_000)
  try {
    const body: any = await response.json().catch(() => undefined)
    const content = body?.choices?.[0]?.message?.content
    if (typeof content !== 'string') {
      throw new ContainerChatError(
        body?.error?.message ? `agent error: ${body.error.message}` : 'agent reply has no content'
      )
    }
    return { content, model: String(body.model ?? target.model), usage: usageOf(body) }
  } finally {
    clear()
  }
}

/** Splits an SSE byte stream into the `data:` payloads of its events. */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder()
  let buffer = ''
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true })
    let boundary
    while ((boundary = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const event = buffer.slice(0, boundary)
      buffer = buffer.slice(boundary).replace(/^\r?\n\r?\n/, '')
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n')
      if (data) yield data
    }
  }
  const rest = buffer.trim()
  if (rest.startsWith('data:')) yield rest.slice(5).trim()
}

/**
 * The reply as it is generated (`stream: true`): yields `{ token }` per
 * content delta; returns the whole reply when the stream ends with
 * `[DONE]`. An `error` object in the stream throws ContainerChatError.
 */
export async function* chatStream(
  target: ChatTarget,
  request: ContainerChatRequest,
  timeouts: ChatTimeouts = {}
): AsyncGenerator<ContainerChatChunk, ContainerChatReply> {
  const { response, clear } = await post(target, request, true, timeouts.replyTimeoutMs ?? 300_000)
  // Headers arrived: from here the stream may take as long as the reply does.
  clear()
  const onAbort = () => void response.body?.cancel().catch(() => undefined)
  request.signal?.addEventListener('abort', onAbort, { once: true })
  let content = ''
  let model = target.model
  let usage: ContainerChatReply['usage']
  let done = false
  try {
    if (!response.body) throw new ContainerChatError('agent stream has no body')
    for await (const data of sseData(response.body)) {
      if (data === '[DONE]') {
        done = true
        break
      }
      let event: any
      try {
        event = JSON.parse(data)
      } catch {
        continue
      }
      if (event?.error) {
        throw new ContainerChatError(
          `agent stream error: ${event.error.message ?? JSON.stringify(event.error)}`
        )
      }
      if (typeof event?.model === 'string') model = event.model
      usage = usageOf(event) ?? usage
      const token = event?.choices?.[0]?.delta?.content
      if (typeof token === 'string' && token.length > 0) {
        content += token
        yield { token }
      }
    }
  } catch (error) {
    if (request.signal?.aborted || error instanceof ContainerChatError) throw error
    throw new ContainerChatError(`agent stream broke: ${(error as Error).message}`, undefined, {
      cause: error,
    })
  } finally {
    request.signal?.removeEventListener('abort', onAbort)
  }
  if (!done) throw new ContainerChatError('agent stream ended without [DONE]')
  return { content, model, usage }
}
