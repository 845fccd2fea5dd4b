/**
 * Chat limits and behaviour (spec "Other limits", CONTRACT.md). The object
 * is mutable on purpose: tests shorten intervals and point the customer
 * provider endpoints at local stand-in servers.
 */
export const chatConfig = {
  /** `message`: 1 to 4000 characters. */
  messageMaxLength: 4000,
  /** `history`: at most 40 entries. */
  historyMaxEntries: 40,
  /** Longest history entry accepted (characters). */
  historyEntryMaxLength: 32_000,
  /** Stored conversation: the newest 200 messages of the last 30 days per agent. */
  storedMessagesKept: 200,
  storedMessagesDays: 30,
  /** Chat answers streamed over SSE at once per account (the next one: 429). */
  maxStreamsPerAccount: 10,
  /**
   * Chats an agent answers at once, every surface together (HTTP, SSE,
   * WebSocket, webhook, schedules, channels; the next one: 429). One agent
   * holds one container and one owner's credits: a burst queues at the
   * client rather than piling onto the container or the model upstream.
   */
  maxConcurrentChatsPerAgent: 4,
  /** SSE comment heartbeat while a stream is open. */
  sseHeartbeatMs: 15_000,
  websocket: {
    /** Server ping interval; a socket that misses one pong is dropped. */
    pingIntervalMs: 30_000,
    /** Largest client frame (a chat message is at most 4000 characters). */
    maxPayloadBytes: 64 * 1024,
    /** Open sockets per account on one instance; more are closed with 4429. */
    maxSocketsPerAccount: 20,
    /** Messages a socket may have waiting for an answer; more close it with 1008. */
    maxQueuedMessages: 8,
    /** How often each socket's credential is checked again (revoked key, expired JWT, disabled account). */
    credentialCheckMs: 5_000,
  },
  /** Inbound webhook: requests per token per window (@adonisjs/limiter). */
  webhookRateLimit: { requests: 30, duration: '1 minute' },
  /** Idempotency-Key: answers are replayed for 24 h; a pending key older than this is taken over. */
  idempotency: { ttlMs: 24 * 60 * 60_000, pendingStaleMs: 10 * 60_000 },
  /**
   * Customer-key providers: OpenAI-compatible base URLs (openai,
   * openrouter) and the Anthropic Messages API base URL.
   */
  providerEndpoints: {
    openai: 'https://api.openai.com/v1',
    openrouter: 'https://openrouter.ai/api/v1',
    anthropic: 'https://api.anthropic.com/v1',
  },
  /** Longest wait for a customer provider's answer (or a stream's first bytes). */
  providerTimeoutMs: 300_000,
  /** Longest silence within a customer provider's stream before it is broken off as failed. */
  providerStreamIdleTimeoutMs: 60_000,
  /**
   * The safety filter (422 CONTENT_BLOCKED): a message containing one of
   * these phrases is refused before anything is stored, routed or charged.
   * Matching ignores case, accents, punctuation and spacing, on whole words.
   * Deliberately small and explicit: a hosted service's last line against
   * plainly illegal requests, not a moderation model.
   */
  blockedPhrases: [
    'child sexual abuse material',
    'csam',
    'build a pipe bomb',
    'make a pipe bomb',
    'synthesize sarin',
    'make ricin',
    'make nerve agent',
  ] as string[],
}

export type ChatConfig = typeof chatConfig
