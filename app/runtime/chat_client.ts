import { emptyCompletion } from '#core/openai/wire'
import { modelGateway, type ModelEndpoint } from '#core/openai/model_gateway'
import type { UpstreamParty } from '#core/openai/gateway_errors'
import type { ContainerChatChunk, ContainerChatReply, ContainerChatRequest } from '#runtime/types'

/**
 * The agent's own framework answers a chat through its OpenAI-compatible
 * endpoint, called through the model gateway. Its failures (unreachable,
 * error status, error inside the stream) are ModelGatewayError; the chat
 * area falls back to the hosted path on them.
 */

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

const FRAMEWORK: UpstreamParty = { name: "The agent's framework" }

function endpointOf(target: ChatTarget, timeouts: ChatTimeouts): ModelEndpoint {
  // A stream may take as long as a whole reply does, but not go silent for that long.
  return {
    url: target.url,
    headers: target.headers,
    party: FRAMEWORK,
    timeoutMs: timeouts.replyTimeoutMs ?? 300_000,
  }
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

/** One whole reply (`stream: false`). */
export async function chatOnce(
  target: ChatTarget,
  request: ContainerChatRequest,
  timeouts: ChatTimeouts = {}
): Promise<ContainerChatReply> {
  const reply = await modelGateway.complete(
    endpointOf(target, timeouts),
    requestBody(target, request, false),
    { signal: request.signal, requireContent: true }
  )
  return { content: reply.content!, model: reply.model, usage: reply.usage ?? undefined }
}

/**
 * The reply as it is generated (`stream: true`): yields `{ token }` per
 * content delta; returns the whole reply when the stream ends with `[DONE]`.
 */
export async function* chatStream(
  target: ChatTarget,
  request: ContainerChatRequest,
  timeouts: ChatTimeouts = {}
): AsyncGenerator<ContainerChatChunk, ContainerChatReply> {
  const reply = emptyCompletion(target.model)
  const chunks = await modelGateway.stream(
    endpointOf(target, timeouts),
    requestBody(target, request, true),
    { signal: request.signal, reply }
  )
  for await (const chunk of chunks) if (chunk.token) yield { token: chunk.token }
  return { content: reply.content, model: reply.model, usage: reply.usage ?? undefined }
}
