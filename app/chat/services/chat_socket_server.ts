import type { IncomingMessage, Server } from 'node:http'
import type { Duplex } from 'node:stream'
import logger from '@adonisjs/core/services/logger'
import { WebSocketServer, type WebSocket } from 'ws'
import { chatConfig } from '#config/chat'
import { tryTakeSlot } from '#core/http/stream_slots'
import { ApiException, NotFoundException } from '#core/exceptions/api_exceptions'
import { mapError } from '#core/http/error_envelope'
import { inspectInput } from '#core/http/input_gate_middleware'
import { bouncerFor } from '#policies/main'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import {
  authenticateBearer,
  bearerFromHeader,
  loadUser,
  type AuthenticatedIdentity,
} from '#identity/services/token_authenticator'
import quotaService from '#identity/services/quota_service'
import { ChatAbortedError, chatWithAgent } from '#chat/services/chat_service'

/**
 * WebSocket chat at `{ws_base_url}/agents/:id/ws`, on the service's own
 * HTTP server (the `upgrade` event; other paths get a 404 and are closed
 * when nothing else handles upgrades).
 *
 * Credential: `Authorization: Bearer <API key | JWT>`, or for browsers the
 * subprotocol `bearer.<token>` (echoed back as the accepted protocol).
 * The socket opens either way so the client can read the close code:
 * 4401 bad or missing credential, 4404 unknown agent, 4403 someone else's
 * agent (CONTRACT.md).
 *
 * Messages: `{ type: 'chat', payload: { message } }` ->
 * `{ type: 'chat_response', payload: { content } }`; `{ type: 'ping' }` ->
 * `{ type: 'pong' }`. Any failure is `{ type: 'error', payload: { code,
 * message } }` and the socket stays open (bad JSON, unknown type,
 * validation, 422, 402, 429 for the daily quota, which each chat message
 * counts against when an API key is used). Messages of one socket are
 * answered in order. The server pings every 30 s and drops a socket that
 * did not answer the previous ping.
 */
export const WS_CLOSE = {
  badCredential: 4401,
  forbidden: 4403,
  unknownAgent: 4404,
  /** Too many open sockets for the account. */
  tooManySockets: 4429,
  /** Too many messages waiting for an answer (RFC 6455 policy violation). */
  tooManyQueued: 1008,
} as const

const PATH = /^\/agents\/([^/?#]+)\/ws\/?(?:\?.*)?$/

/** The close code of an agent the socket may not open (findAgent's 404, AgentPolicy's 403). */
const CLOSE_CODE_OF: Record<string, number> = {
  NOT_FOUND: WS_CLOSE.unknownAgent,
  FORBIDDEN: WS_CLOSE.forbidden,
}
const BEARER_PROTOCOL = 'bearer.'

/** Kept small: thousands of idle sockets hold one each. */
interface SocketState {
  alive: boolean
  userId: string
  /** Chat messages count against the daily quota when the socket was opened with an API key. */
  metered: boolean
  agentId: string
  /** The message being answered (and those queued behind it). */
  queue: Promise<void> | null
  /** How many messages wait in `queue` (bounded: chatConfig.websocket.maxQueuedMessages). */
  pending: number
  /** The credential the socket was opened with, checked again every few seconds. */
  token: string
  /** Aborts the model call in flight when the socket closes. */
  abort: AbortController | null
}

function send(ws: WebSocket, message: unknown) {
  if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(message))
}

function sendError(ws: WebSocket, code: string, message: string) {
  send(ws, { type: 'error', payload: { code, message } })
}

function protocolToken(req: IncomingMessage): string | null {
  const header = req.headers['sec-websocket-protocol']
  if (!header) return null
  for (const protocol of header.split(',')) {
    const value = protocol.trim()
    if (value.startsWith(BEARER_PROTOCOL) && value.length > BEARER_PROTOCOL.length) {
      return value.slice(BEARER_PROTOCOL.length)
    }
  }
  return null
}

type Admission =
  | { ok: true; identity: AuthenticatedIdentity; agentId: string; token: string }
  | { ok: false; code: number; reason: string }

async function admit(req: IncomingMessage, agentParam: string): Promise<Admission> {
  const token = bearerFromHeader(req.headers.authorization) ?? protocolToken(req) ?? ''
  let identity: AuthenticatedIdentity
  try {
    identity = await authenticateBearer(token, { allow: ['api_key', 'jwt'] })
  } catch (error) {
    if (!(error instanceof ApiException)) throw error
    return { ok: false, code: WS_CLOSE.badCredential, reason: error.message }
  }
  const id = decodeURIComponent(agentParam)
  try {
    const agent = await findAgent(id)
    // No HTTP context here: a Bouncer for the credential's account, as for any work outside a request.
    await bouncerFor(identity.user).with(AgentPolicy).authorize('chat', agent)
    return { ok: true, identity, agentId: agent.id, token }
  } catch (error) {
    const mapped = mapError(error)
    const code = CLOSE_CODE_OF[mapped.body.code]
    if (code === undefined) throw error
    return { ok: false, code, reason: mapped.body.error }
  }
}

export class ChatSocketServer {
  readonly wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: chatConfig.websocket.maxPayloadBytes,
    handleProtocols: (protocols) => {
      for (const protocol of protocols) if (protocol.startsWith(BEARER_PROTOCOL)) return protocol
      return false
    },
  })
  readonly #servers = new WeakSet<Server>()
  readonly #states = new WeakMap<WebSocket, SocketState>()
  #pinger?: NodeJS.Timeout
  #credentialCheck?: NodeJS.Timeout

  attach(server: Server): void {
    if (this.#servers.has(server)) return
    this.#servers.add(server)
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      this.#upgrade(server, req, socket, head)
    )
    this.#startPinging()
    this.#startCredentialChecks()
  }

  /**
   * Every few seconds each socket's credential is authenticated again: a
   * revoked API key, an expired JWT or a disabled account closes the socket
   * with 4401 within that time.
   */
  #startCredentialChecks() {
    if (this.#credentialCheck) return
    this.#credentialCheck = setInterval(() => {
      for (const ws of this.wss.clients) {
        const state = this.#states.get(ws)
        if (!state) continue
        void this.#checkCredential(ws, state)
      }
    }, chatConfig.websocket.credentialCheckMs)
    this.#credentialCheck.unref()
  }

  async #checkCredential(ws: WebSocket, state: SocketState) {
    let reason: string | null = null
    try {
      const identity = await authenticateBearer(state.token, { allow: ['api_key', 'jwt'] })
      if (identity.row.disabled_at) reason = 'The account is disabled'
    } catch (error) {
      if (error instanceof ApiException) reason = 'The credential was revoked or has expired'
      else logger.warn({ err: error }, 'chat websocket: credential check failed')
    }
    if (!reason || ws.readyState !== ws.OPEN) return
    sendError(ws, 'AUTH_REQUIRED', reason)
    ws.close(WS_CLOSE.badCredential, reason)
  }

  /** Open sockets (for tests and the benchmark). */
  get size(): number {
    return this.wss.clients.size
  }

  /** Stops the timers and ends every socket: with 1001 "going away" when the service stops. */
  close(options: { goingAway?: boolean } = {}): void {
    clearTimeout(this.#pinger)
    this.#pinger = undefined
    clearInterval(this.#credentialCheck)
    this.#credentialCheck = undefined
    for (const ws of this.wss.clients) {
      if (options.goingAway && ws.readyState === ws.OPEN)
        ws.close(1001, 'The service is restarting')
      else ws.terminate()
    }
  }

  /** Changes the keepalive interval (applies from the next tick). */
  setPingInterval(ms: number): void {
    chatConfig.websocket.pingIntervalMs = ms
    if (this.#pinger) {
      clearTimeout(this.#pinger)
      this.#pinger = undefined
      this.#startPinging()
    }
  }

  #startPinging() {
    if (this.#pinger) return
    this.#pinger = setTimeout(() => {
      this.#pinger = undefined
      this.#pingAll()
      this.#startPinging()
    }, chatConfig.websocket.pingIntervalMs)
    this.#pinger.unref()
  }

  /** Drops sockets that did not answer the previous ping, pings the others. */
  #pingAll() {
    for (const ws of this.wss.clients) {
      const state = this.#states.get(ws)
      if (!state) continue
      if (!state.alive) {
        ws.terminate()
        continue
      }
      state.alive = false
      ws.ping()
    }
  }

  #upgrade(server: Server, req: IncomingMessage, socket: Duplex, head: Buffer) {
    const match = PATH.exec(req.url ?? '')
    if (!match) {
      // Other upgrade handlers (if any) own other paths.
      if (server.listenerCount('upgrade') <= 1) {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n')
      }
      return
    }
    socket.on('error', () => {})
    admit(req, match[1])
      .then(async (admission) => {
        const release = admission.ok
          ? await tryTakeSlot('sockets', admission.identity.user.id)
          : null
        this.#open(req, socket, head, admission, release)
      })
      .catch((error) => {
        logger.error({ err: error }, 'chat websocket: upgrade failed')
        socket.destroy()
      })
  }

  /** `release`: the account's socket slot (null when it has none left: closed with 4429). */
  #open(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    admission: Admission,
    release: (() => void) | null
  ) {
    if (socket.destroyed) {
      release?.()
      return
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      if (admission.ok) {
        const userId = admission.identity.user.id
        if (!release) {
          ws.close(
            WS_CLOSE.tooManySockets,
            `At most ${chatConfig.websocket.maxSocketsPerAccount} open sockets per account`
          )
          return
        }
        ws.once('close', release)
        this.#accept(ws, {
          alive: true,
          userId,
          metered: admission.identity.via === 'api_key',
          agentId: admission.agentId,
          queue: null,
          pending: 0,
          token: admission.token,
          abort: null,
        })
      } else {
        ws.close(admission.code, admission.reason.slice(0, 120))
      }
    })
  }

  /** Listeners are made here, apart from the upgrade's scope, so a socket keeps only its state. */
  #accept(ws: WebSocket, state: SocketState) {
    this.#states.set(ws, state)
    ws.on('pong', () => {
      state.alive = true
    })
    ws.on('message', (data, isBinary) => {
      state.alive = true
      // Bounded: a client that sends faster than it is answered is cut off, not buffered.
      if (state.pending >= chatConfig.websocket.maxQueuedMessages) {
        sendError(ws, 'RATE_LIMIT_EXCEEDED', 'Too many messages waiting for an answer')
        ws.close(WS_CLOSE.tooManyQueued, 'Too many messages waiting for an answer')
        return
      }
      state.pending++
      const previous = state.queue ?? Promise.resolve()
      const current = previous
        .then(() => this.#handle(ws, state, data, isBinary))
        .finally(() => state.pending--)
      state.queue = current
      // Drop the chain once idle, so an idle socket holds no promise.
      void current.then(() => {
        if (state.queue === current) state.queue = null
      })
    })
    ws.on('close', () => state.abort?.abort(new Error('socket closed')))
    ws.on('error', () => {})
  }

  async #handle(ws: WebSocket, state: SocketState, data: unknown, isBinary: boolean) {
    if (ws.readyState !== ws.OPEN) return
    let message: any
    try {
      message = JSON.parse(isBinary ? Buffer.from(data as Buffer).toString('utf8') : String(data))
    } catch {
      return sendError(ws, 'VALIDATION_ERROR', 'Messages must be JSON objects')
    }
    const type = message?.type
    if (type === 'ping') return send(ws, { type: 'pong' })
    if (type !== 'chat') {
      return sendError(
        ws,
        'VALIDATION_ERROR',
        `Unknown message type ${JSON.stringify(type ?? null)}; expected "chat"`
      )
    }
    try {
      // The HTTP input gate's check (no middleware runs for socket messages).
      inspectInput(message.payload ?? null, 'payload')
      const user = await loadUser(state.userId)
      if (!user || user.disabledAt) {
        sendError(ws, 'AUTH_REQUIRED', 'Invalid or expired credential')
        ws.close(WS_CLOSE.badCredential, 'Invalid or expired credential')
        return
      }
      if (state.metered) {
        const quota = await quotaService.consume(user)
        if (!quota.allowed) {
          return sendError(
            ws,
            'RATE_LIMIT_EXCEEDED',
            `Daily request limit of ${quota.limit} reached; it resets at ${quota.resetAt.toISOString()}`
          )
        }
      }
      // Deleted since the socket opened (or no longer the account's): gone for this socket.
      const agent = await findAgent(state.agentId).catch((error) => {
        if (error instanceof NotFoundException) return null
        throw error
      })
      if (!agent || (await bouncerFor(user).with(AgentPolicy).denies('chat', agent))) {
        sendError(ws, 'NOT_FOUND', 'Agent not found')
        ws.close(WS_CLOSE.unknownAgent, 'Agent not found')
        return
      }
      state.abort = new AbortController()
      const answer = await chatWithAgent(agent, message.payload ?? {}, {
        source: 'websocket',
        signal: state.abort.signal,
      })
      send(ws, { type: 'chat_response', payload: { content: answer.content } })
    } catch (error) {
      if (error instanceof ChatAbortedError) return
      const mapped = mapError(error)
      if (mapped.unexpected) logger.error({ err: error }, 'chat websocket: message failed')
      sendError(ws, mapped.body.code, mapped.body.error)
    } finally {
      state.abort = null
    }
  }
}

/** The one WebSocket server of this process (attached by the chat provider). */
export const chatSocketServer = new ChatSocketServer()
