import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import type Agent from '#agents/models/agent'
import { findChatAgent } from '#chat/services/chat_service'

declare module '@adonisjs/core/http' {
  interface HttpContext {
    /** The agent row of `:id`, read while the quota is counted (readAgentAhead). */
    chatAgentAhead?: Promise<Agent>
  }
}

/**
 * Starts the chat's agent read (findChatAgent: the row and its knowledge
 * flag) before the daily quota is counted, so the two database round trips
 * overlap instead of following each other. Only a read: the handler awaits
 * it after the quota passed, so a refused request still answers 429 first,
 * and ownership is checked on it as before.
 */
export function readAgentAhead(ctx: HttpContext, next: NextFn) {
  const agent = findChatAgent(ctx.params.id)
  // Awaited by the handler, or never (429): its failure must not be unhandled meanwhile.
  agent.catch(() => {})
  ctx.chatAgentAhead = agent
  return next()
}

/** The agent `readAgentAhead` started reading, else read now. */
export function chatAgentOf(ctx: HttpContext): Promise<Agent> {
  return ctx.chatAgentAhead ?? findChatAgent(ctx.params.id)
}
