import type { ContainerChatRequest } from '#runtime/types'

/**
 * The private turn a framework gets before its first checkpoint (see
 * `warmUpBeforeCheckpoint` in app/plugins/types.ts and docs/runtime.md
 * "Sleep and wake"). It runs in a conversation of its own, so it touches no
 * user's session, and the model proxy answers it itself, free: it costs the
 * owner no credits and reaches no upstream model.
 */
export const WARM_UP_CONVERSATION = 'agent-host-warm-up'

/** Improbable in a real message; anyone who sends it gets the same free "OK" and nothing more. */
export const WARM_UP_MARKER = 'agent-host:warm-up-turn:6c1f0b9e'

export const WARM_UP_REPLY = 'OK'

export const warmUpRequest = (signal?: AbortSignal): ContainerChatRequest => ({
  conversationId: WARM_UP_CONVERSATION,
  messages: [{ role: 'user', content: `${WARM_UP_MARKER} Reply with OK.` }],
  signal,
})
