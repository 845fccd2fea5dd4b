import {
  CompletionStreamError,
  completionDeltas,
  openAiUsage,
  type StreamedCompletion,
} from '#core/openai/wire'
import { upstreamRequest, type UpstreamResponse } from '#core/openai/upstream_http'
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
  return {
    model: target.model,
    messages: request.messages,
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
    // OpenAI's `user` field: frameworks key their sessions on it.
    user: request.conversationId,
  }
}

/** Sends the request; an error status or no answer is a ContainerChatError. */
async function post(
  target: ChatTarget,
  request: ContainerChatRequest,
  stream: boolean,
  timeoutMs: number
): Promise<UpstreamResponse> {
  let response: UpstreamResponse
  try {
    response = await upstreamRequest(target.url, {
      headers: { accept: stream ? 'text/event-stream' : 'application/json', ...target.headers },
      body: requestBody(target, request, stream),
      signal: request.signal,
      timeoutMs,
    })
  } catch (error) {
    if (request.signal?.aborted) throw error
    throw new ContainerChatError(`agent: ${(error as Error).message}`, undefined, {
      cause: error,
    })
  }
  if (response.status < 200 || response.status > 299) {
    const text = await response.text().catch(() => '')
    throw new ContainerChatError(
      `agent answered ${response.status}: ${text.slice(0, 300)}`,
      response.status
    )
  }
  return response
}

/** One whole reply (`stream: false`). */
export async function chatOnce(
  target: ChatTarget,
  request: ContainerChatRequest,
  timeouts: ChatTimeouts = {}
): Promise<ContainerChatReply> {
  const response = await post(target, request, false, timeouts.replyTimeoutMs ?? 300_000)
  const body: any = await response.json().catch((error: Error) => {
    if (request.signal?.aborted) throw error
    throw new ContainerChatError(`agent reply broke off: ${error.message}`, undefined, {
      cause: error,
    })
  })
  const content = body?.choices?.[0]?.message?.content
  if (typeof content !== 'string') {
    throw new ContainerChatError(
      body?.error?.message ? `agent error: ${body.error.message}` : 'agent reply has no content'
    )
  }
  return {
    content,
    model: String(body.model ?? target.model),
    usage: openAiUsage(body) ?? undefined,
  }
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
  const response = await post(target, request, true, timeouts.replyTimeoutMs ?? 300_000)
  // Headers arrived: the stream may take as long as the reply does, but not go silent for that long.
  response.streaming()
  let reply: StreamedCompletion
  try {
    const deltas = completionDeltas(response.body, target.model)
    let step = await deltas.next()
    for (; !step.done; step = await deltas.next()) yield { token: step.value }
    reply = step.value
  } catch (error) {
    if (request.signal?.aborted || error instanceof ContainerChatError) throw error
    if (error instanceof CompletionStreamError) {
      throw new ContainerChatError(`agent stream error: ${error.message}`)
    }
    throw new ContainerChatError(`agent stream broke: ${(error as Error).message}`, undefined, {
      cause: error,
    })
  }
  if (!reply.done) throw new ContainerChatError('agent stream ended without [DONE]')
  return { content: reply.content, model: reply.model, usage: reply.usage ?? undefined }
}
