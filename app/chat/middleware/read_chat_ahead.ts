import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import type Agent from '#agents/models/agent'
import { findChatAgent, prefetchChat, type ChatPrefetch } from '#chat/services/chat_service'

/** The chat's reads started ahead of the handler: the agent row and prefetchChat's lookups. */
export interface ChatReadAhead {
  agent: Promise<Agent>
  prefetched?: ChatPrefetch
}

declare module '@adonisjs/core/http' {
  interface HttpContext {
    /** Started while the quota is counted (readChatAhead). */
    chatReadAhead?: ChatReadAhead
  }
}

function startReads(ctx: HttpContext): ChatReadAhead {
  const reads = {
    prefetched: prefetchChat(ctx.params.id, ctx.request.body()),
    agent: findChatAgent(ctx.params.id),
  }
  // Awaited by the handler, or never (429): a failure must not be unhandled meanwhile.
  reads.agent.catch(() => {})
  return reads
}

/**
 * Starts the chat's reads (the agent row with its knowledge flag, and
 * prefetchChat's lookups: stored turns, container target, knowledge)
 * before the daily quota is counted, so their round trips overlap the
 * quota's instead of following it. Reads only: the handler uses them after
 * the quota passed, so a refused request still answers 429 first, and
 * ownership is checked on the agent as before (prefetchChat returns nothing
 * to a caller that fails it).
 */
export function readChatAhead(ctx: HttpContext, next: NextFn) {
  ctx.chatReadAhead = startReads(ctx)
  return next()
}

/** The reads `readChatAhead` started, else started now. */
export function chatReadsOf(ctx: HttpContext): ChatReadAhead {
  return ctx.chatReadAhead ?? startReads(ctx)
}
