import type { PluginIdentity } from '#plugins/types'

/* ---------------------------------------------------------------------------
 * Channel connectors (telegram, discord, whatsapp, twitter, ...)
 *
 * The service holds each connection once (docs/channels.md): the channel
 * supervisor claims a lease, calls `connect`, and the connector hands every
 * inbound message to `context.receive` together with a way to answer it.
 * The router does the rest (allowlist, rate limit, at-most-once, chat
 * service, splitting, typing).
 * ------------------------------------------------------------------------- */

/** A message that arrived on a channel, as a connector hands it to the router. */
export interface ChannelInboundMessage {
  /** Channel-side id of the message, unique within the connection: it is answered at most once. */
  id: string
  /** Where the answer goes: chat id, channel id, DM id, tweet conversation. */
  conversationId: string
  sender: { id: string; handle?: string; name?: string }
  text: string
  /** Sent by the connected account itself: ignored by the router. */
  fromSelf?: boolean
}

/** Where an answer goes: the conversation and, where the channel threads, the message answered. */
export interface ChannelReplyTarget {
  conversationId: string
  replyTo?: string
}

/** How the router answers a message; given by the connector with each message. */
export interface ChannelReplier {
  /** Sends one message (at most the plugin's maxMessageLength characters). */
  send(target: ChannelReplyTarget, text: string): Promise<void>
  /** Shows "typing..." in the conversation (refreshed by the router while the agent works). */
  typing?(conversationId: string): Promise<void>
}

/** States reported in channel-status (`disconnected`: not configured, or the agent is not active). */
export const channelStates = [
  'disconnected',
  'connecting',
  'connected',
  'qr_pending',
  'error',
  'logged_out',
] as const
export type ChannelState = (typeof channelStates)[number]

export interface ChannelStateReport {
  state: Exclude<ChannelState, 'disconnected'>
  /** What went wrong, in words (state `error`, or a reconnect in progress). */
  error?: string
  /** Who the connection is on the channel: `{ username }`, `{ phone }`, `{ handle }`. */
  identity?: Record<string, string>
  /** Pairing channels, state `qr_pending`: the QR as a data:image/png;base64 URL and its life. */
  qr?: { dataUrl: string; raw: string; expiresIn: number }
}

/** Durable state of one connection (session keys, cursors), stored encrypted by the service. */
export interface ChannelStore {
  load<T>(): Promise<T | undefined>
  save(value: unknown): Promise<void>
}

export interface ChannelConnectContext {
  agentId: string
  /** The channel's validated credentials from the agent's config, in clear (never log them). */
  credentials: Record<string, unknown>
  /** Base URL of the channel's API (TELEGRAM_API_URL, ...); undefined means the library's default. */
  apiBaseUrl?: string
  /**
   * Set when the service has a public https address: the channel may
   * register this URL for pushed updates (whose bodies reach `webhook`)
   * instead of polling. Never both.
   */
  webhookUrl?: string
  store: ChannelStore
  /** Hands one inbound message to the router; resolves once it is answered or ignored. */
  receive(message: ChannelInboundMessage, replier: ChannelReplier): Promise<void>
  /** State changes after connect resolved (reconnecting, QR shown, linked, logged out). */
  report(report: ChannelStateReport): void
  /** Aborted when the connection must end (disconnect, lease lost, shutdown). */
  signal: AbortSignal
  log(message: string, detail?: Record<string, unknown>): void
}

/** A live connection held by this instance. */
export interface ChannelSession {
  /** Who the connection is on the channel (status detail), when known. */
  identity: Record<string, string>
  /**
   * Ends the connection (context.signal is aborted first). `removed`: the
   * owner disconnected the channel or stopped the agent (undo any
   * registration, such as a webhook); `handover`: another instance or a
   * restart takes it over (keep what the channel holds).
   */
  close(reason: 'removed' | 'handover'): Promise<void>
}

/**
 * The channel refused the credentials (revoked or wrong token, logged out):
 * the connection ends in state `error` with this message and is not retried
 * until the credentials change.
 */
export class ChannelAuthError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ChannelAuthError'
  }
}

export interface ChannelConnector {
  /** Longest text of one outgoing message; longer replies are split. */
  maxMessageLength: number
  /**
   * `config`: connects when credentials are set under channels.<name> in
   * the agent's config; `pairing`: connects through POST pair-channel (QR).
   */
  connectsBy: 'config' | 'pairing'
  /**
   * Checks and normalises the credentials a user configures (without
   * `allowFrom`, which the service handles). Throws an Error whose message
   * names the field when they are wrong (answered as a 400).
   */
  validateCredentials(credentials: Record<string, unknown>): Record<string, unknown>
  /**
   * Connects and starts handing inbound messages to context.receive.
   * Resolves once connected (or, for pairing channels, once a QR or a
   * restored session is there). Throws ChannelAuthError for refused
   * credentials; any other error is retried with backoff.
   */
  connect(context: ChannelConnectContext): Promise<ChannelSession>
  /**
   * Channels that take pushed updates: one update body as the channel
   * posted it to context.webhookUrl. Any instance may handle it.
   */
  webhook?(context: ChannelConnectContext, body: unknown): Promise<void>
}

export interface ChannelPlugin extends PluginIdentity<'channel'>, ChannelConnector {}
