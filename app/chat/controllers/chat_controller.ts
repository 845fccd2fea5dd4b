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
import { chatReadsOf } from '#chat/middleware/read_chat_ahead'
import {
  IDEMPOTENCY_HEADER,
  idempotencyKeyOf,
  startIdempotent,
  type IdempotencyTicket,
} from '#chat/services/idempotency'

export default class ChatController {
  async programmatic(ctx: HttpContext) {
    const user = ctx.auth.getUserOrFail()
    const body = ctx.request.body()
    const reads = chatReadsOf(ctx)
    const prefetched = reads.prefetched
    const agent = await reads.agent
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
