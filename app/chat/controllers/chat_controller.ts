import type { HttpContext } from '@adonisjs/core/http'
import logger from '@adonisjs/core/services/logger'
import { mapError } from '#core/http/error_envelope'
import {
  ChatAbortedError,
  chatWithAgent,
  findChatAgent,
  prefetchChat,
  testChat,
} from '#chat/services/chat_service'
import { chatConfig } from '#config/chat'
import AgentPolicy from '#agents/policies/agent_policy'
import { takeStreamSlot } from '#core/http/stream_slots'
import { SseStream, abortOnDisconnect } from '#core/http/sse_stream'
import { idempotentJson } from '#chat/services/idempotent_route'
import {
  IDEMPOTENCY_HEADER,
  idempotencyKeyOf,
  startIdempotent,
  type IdempotencyTicket,
} from '#chat/services/idempotency'

export default class ChatController {
  /**
   * @programmatic
   * @summary Chat with an agent (one reply)
   * @description API key; counts against the daily quota. Routed to the agent's running container, else the customer's provider key, else the hosted model (AI Credits; 402 INSUFFICIENT_CREDITS at a balance of 0). `history` replaces the stored context. 422 CONTENT_BLOCKED when the safety filter refuses the message. An `Idempotency-Key` header makes a retry within 24 h return the first answer without running or charging again (409 while the first is still running).
   * @requestBody {"message":"Hello!","history":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello, how can I help?"}]}
   * @responseBody 200 - {"success":true,"data":{"content":"Hi! How can I help you today?","model":"gpt-4o-mini"}}
   */
  async programmatic(ctx: HttpContext) {
    const user = ctx.auth.getUserOrFail()
    const body = ctx.request.body()
    const prefetched = prefetchChat(ctx.params.id, body)
    const agent = await findChatAgent(ctx.params.id)
    await ctx.bouncer.with(AgentPolicy).authorize('chat', agent)
    return idempotentJson(
      ctx,
      { scope: user.id, route: 'api.chat', request: { agentId: agent.id, body } },
      () =>
        chatWithAgent(agent, body, {
          source: 'api',
          signal: abortOnDisconnect(ctx).signal,
          prefetched,
        })
    )
  }

  /**
   * @stream
   * @summary Chat with an agent (SSE stream)
   * @description JWT. `text/event-stream`: `data: {"token": "..."}` per chunk, then `data: [DONE]`; a failure after the stream began is `data: {"error": "..."}` then `data: [DONE]`; a `: heartbeat` comment every 15 s. Failures before the stream begins (validation, 422, 402) are JSON errors. Closing the connection cancels the model call; only what was generated is charged. Supports `Idempotency-Key` (a retry replays the stored answer as one token event).
   * @requestBody {"message":"Tell me a story"}
   * @responseBody 200 - data: {"token":"Once"}\n\ndata: {"token":" upon"}\n\ndata: [DONE]
   */
  async stream(ctx: HttpContext) {
    const user = ctx.auth.getUserOrFail()
    const body = ctx.request.body()
    const prefetched = prefetchChat(ctx.params.id, body)
    const agent = await findChatAgent(ctx.params.id)
    await ctx.bouncer.with(AgentPolicy).authorize('chat', agent)
    const release = await takeStreamSlot('chat', user.id)
    ctx.response.response.once('close', release)
    const sse = new SseStream(ctx, { heartbeatMs: chatConfig.sseHeartbeatMs })

    const key = idempotencyKeyOf(ctx.request.header(IDEMPOTENCY_HEADER))
    let ticket: IdempotencyTicket | undefined
    if (key) {
      const start = await startIdempotent({
        scope: user.id,
        route: 'agents.chat.stream',
        key,
        request: { agentId: agent.id, body },
      })
      if (start.replay) {
        ctx.response.header('Idempotency-Replayed', 'true')
        sse.open()
        if (start.response?.content) sse.send({ token: start.response.content })
        sse.done()
        return
      }
      ticket = start.ticket
    }

    const abort = abortOnDisconnect(ctx)
    try {
      const answer = await chatWithAgent(agent, body, {
        source: 'stream',
        signal: abort.signal,
        onBegin: () => sse.open(),
        onToken: (token) => sse.send({ token }),
        prefetched,
      })
      await ticket?.complete(answer)
      sse.open()
      sse.done()
    } catch (error) {
      await ticket?.release()
      if (!sse.opened) throw error
      if (error instanceof ChatAbortedError || sse.closed) return
      const mapped = mapError(error)
      if (mapped.unexpected) logger.error({ err: error, agentId: agent.id }, 'chat stream failed')
      sse.fail(mapped.body.error)
    }
  }

  /**
   * @testChat
   * @summary Try a system prompt
   * @description JWT. One reply from the hosted model for `systemPrompt` + `message`; nothing is stored; AI Credits are charged like any hosted call (402 at a balance of 0). Supports `Idempotency-Key`.
   * @requestBody {"message":"Who are you?","systemPrompt":"You are a pirate."}
   * @responseBody 200 - {"success":true,"data":{"text":"Arr, a humble pirate of the seven seas!"}}
   */
  async testChat(ctx: HttpContext) {
    const user = ctx.auth.getUserOrFail()
    const body = ctx.request.body()
    return idempotentJson(
      ctx,
      { scope: user.id, route: 'agents.test_chat', request: body },
      async () => {
        const { text } = await testChat(user, body, {
          source: 'test',
          signal: abortOnDisconnect(ctx).signal,
        })
        return { text }
      }
    )
  }
}
