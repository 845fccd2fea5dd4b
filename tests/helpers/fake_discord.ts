import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { WebSocketServer, type WebSocket } from 'ws'

/**
 * A stand-in for Discord on 127.0.0.1 speaking its wire format for what the
 * discord connector uses. REST (`/api/v10`): `GET /gateway/bot` (the
 * gateway URL is this server's own WebSocket), `POST /channels/:id/messages`
 * and `POST /channels/:id/typing`, with `Authorization: Bot <token>` (401
 * `{ message, code: 0 }` for a revoked or unknown token). Gateway (JSON
 * encoding, no compression): HELLO on connect, IDENTIFY recorded, READY
 * dispatched, heartbeats acknowledged; tests dispatch MESSAGE_CREATE to the
 * sessions of a bot with `userSays`.
 */
export interface FakeDiscordBot {
  id: string
  username: string
  token: string
  revoked: boolean
}

export interface PostedMessage {
  token: string
  channelId: string
  content: string
  replyTo?: string
}

interface GatewaySession {
  socket: WebSocket
  token?: string
  sequence: number
}

let snowflake = 1_200_000_000_000_000_000n
const nextId = () => String(snowflake++)

export class FakeDiscord {
  readonly bots: FakeDiscordBot[] = []
  readonly posted: PostedMessage[] = []
  readonly typing: string[] = []
  readonly identifies: Array<{ token: string; intents: number }> = []
  readonly restCalls: Array<{ token: string; path: string }> = []
  readonly #sessions = new Set<GatewaySession>()
  #server?: Server
  #gateway?: WebSocketServer

  get origin(): string {
    const address = this.#server?.address() as AddressInfo | null
    if (!address) throw new Error('fake Discord not started')
    return `127.0.0.1:${address.port}`
  }

  /** Base URL of the REST API, as DISCORD_API_URL. */
  get url(): string {
    return `http://${this.origin}/api`
  }

  addBot(username: string): FakeDiscordBot {
    const id = nextId()
    const bot = {
      id,
      username,
      token: `${Buffer.from(id).toString('base64url')}.GfakeT.${Math.random().toString(36).slice(2).padEnd(27, 'x')}`,
      revoked: false,
    }
    this.bots.push(bot)
    return bot
  }

  /** Live gateway sessions identified with this bot's token. */
  sessionsOf(bot: FakeDiscordBot): number {
    return [...this.#sessions].filter((session) => session.token === bot.token).length
  }

  /** Someone writes in a channel (a DM unless guildId is given); dispatched to the bot's sessions. */
  userSays(
    bot: FakeDiscordBot,
    content: string,
    options: { channelId?: string; guildId?: string; mention?: boolean; authorId?: string } = {}
  ) {
    const message = {
      id: nextId(),
      channel_id: options.channelId ?? '900',
      ...(options.guildId ? { guild_id: options.guildId } : {}),
      author: {
        id: options.authorId ?? '314',
        username: 'ada',
        global_name: 'Ada',
        discriminator: '0',
        avatar: null,
      },
      content: options.mention ? `<@${bot.id}> ${content}` : content,
      timestamp: new Date().toISOString(),
      edited_timestamp: null,
      tts: false,
      mention_everyone: false,
      mentions: options.mention
        ? [{ id: bot.id, username: bot.username, discriminator: '0', avatar: null, bot: true }]
        : [],
      mention_roles: [],
      attachments: [],
      embeds: [],
      pinned: false,
      type: 0,
    }
    this.dispatch(bot, 'MESSAGE_CREATE', message)
    return message
  }

  dispatch(bot: FakeDiscordBot, event: string, data: unknown) {
    for (const session of this.#sessions) {
      if (session.token !== bot.token) continue
      session.socket.send(JSON.stringify({ op: 0, t: event, s: ++session.sequence, d: data }))
    }
  }

  postedTo(bot: FakeDiscordBot, channelId: string): PostedMessage[] {
    return this.posted.filter(
      (message) => message.token === bot.token && message.channelId === channelId
    )
  }

  async start(): Promise<this> {
    this.#server = createServer((request, response) => {
      this.#rest(request, response).catch((error) => response.writeHead(500).end(String(error)))
    })
    this.#gateway = new WebSocketServer({ server: this.#server })
    this.#gateway.on('connection', (socket) => this.#open(socket))
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve))
    return this
  }

  async close() {
    for (const session of this.#sessions) session.socket.terminate()
    this.#gateway?.close()
    const server = this.#server
    this.#server = undefined
    if (!server) return
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  #open(socket: WebSocket) {
    const session: GatewaySession = { socket, sequence: 0 }
    this.#sessions.add(session)
    socket.on('close', () => this.#sessions.delete(session))
    socket.send(JSON.stringify({ op: 10, d: { heartbeat_interval: 41_250 } }))
    socket.on('message', (raw) => {
      const payload = JSON.parse(String(raw))
      if (payload.op === 1) socket.send(JSON.stringify({ op: 11 }))
      if (payload.op !== 2) return
      const bot = this.bots.find((candidate) => candidate.token === payload.d.token)
      this.identifies.push({ token: payload.d.token, intents: payload.d.intents })
      if (!bot || bot.revoked) {
        socket.close(4004, 'Authentication failed.')
        return
      }
      session.token = bot.token
      session.sequence++
      socket.send(
        JSON.stringify({
          op: 0,
          t: 'READY',
          s: session.sequence,
          d: {
            v: 10,
            user: {
              id: bot.id,
              username: bot.username,
              discriminator: '0',
              avatar: null,
              bot: true,
            },
            guilds: [],
            session_id: nextId(),
            resume_gateway_url: `ws://${this.origin}`,
            shard: [0, 1],
            application: { id: bot.id, flags: 0 },
          },
        })
      )
    })
  }

  async #rest(request: IncomingMessage, response: ServerResponse) {
    const chunks: Buffer[] = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {}
    const path = new URL(request.url ?? '/', `http://${this.origin}`).pathname
    const token = (request.headers.authorization ?? '').replace(/^Bot /, '')
    this.restCalls.push({ token, path })
    const bot = this.bots.find((candidate) => candidate.token === token)
    if (!bot || bot.revoked)
      return this.#json(response, 401, { message: '401: Unauthorized', code: 0 })

    if (request.method === 'GET' && path === '/api/v10/gateway/bot') {
      return this.#json(response, 200, {
        url: `ws://${this.origin}`,
        shards: 1,
        session_start_limit: {
          total: 1000,
          remaining: 999,
          reset_after: 14_400_000,
          max_concurrency: 1,
        },
      })
    }
    const messages = /^\/api\/v10\/channels\/(\d+)\/messages$/.exec(path)
    if (request.method === 'POST' && messages) {
      this.posted.push({
        token,
        channelId: messages[1],
        content: body.content,
        replyTo: body.message_reference?.message_id,
      })
      return this.#json(response, 200, {
        id: nextId(),
        channel_id: messages[1],
        content: body.content,
        author: { id: bot.id, username: bot.username, discriminator: '0', avatar: null, bot: true },
        timestamp: new Date().toISOString(),
        type: body.message_reference ? 19 : 0,
      })
    }
    const typing = /^\/api\/v10\/channels\/(\d+)\/typing$/.exec(path)
    if (request.method === 'POST' && typing) {
      this.typing.push(typing[1])
      response.writeHead(204).end()
      return
    }
    this.#json(response, 404, { message: '404: Not Found', code: 0 })
  }

  #json(response: ServerResponse, status: number, body: unknown) {
    response.writeHead(status, { 'content-type': 'application/json' })
    response.end(JSON.stringify(body))
  }
}
