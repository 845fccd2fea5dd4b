import type { TokenUsage } from '#chat/services/metering'

/** One turn sent to a model. */
export interface ChatTurn {
  role: 'system' | 'user' | 'assistant'
  content: string
}

/** What a model path answered. */
export interface ModelReply {
  content: string
  /** The model name as the answering side reported it. */
  model: string
  usage: TokenUsage | null
}

/** Where a chat came from (stored with nothing; used in logs, metering metadata and feed). */
export type ChatSource =
  'api' | 'stream' | 'websocket' | 'webhook' | 'test' | 'schedule' | 'channel'
