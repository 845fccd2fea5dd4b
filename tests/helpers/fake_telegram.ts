import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A stand-in for the Telegram Bot API on 127.0.0.1, speaking its wire
 * format (`POST /bot<token>/<method>`, JSON in, `{ ok, result }` or
 * `{ ok: false, error_code, description }` out) for what the telegram
 * connector uses: getMe, getUpdates (a real long poll with offset and
 * timeout), setWebhook, deleteWebhook, getWebhookInfo, sendMessage and
 * sendChatAction. Like Telegram, a getUpdates ends the one still open for
 * the same bot with 409 "terminated by other getUpdates request" (counted
 * in `conflicts`: two pollers of one bot fight), answers 409 while a
 * webhook is set, and 401 to a revoked token. Tests push user messages
 * with `userSays`.
 */
export interface FakeBot {
  id: number
  username: string
  revoked: boolean
  webhookUrl: string
  /** Updates not yet confirmed by an offset. */
  queue: Array<{ update_id: number; message: Record<string, unknown> }>
  nextUpdateId: number
  nextMessageId: number
  /** getUpdates calls waiting for updates. */
  polling: number
  /** Open getUpdates calls terminated by a newer one (409), as Telegram does. */
  conflicts: number
  /** Ends the open getUpdates with a 409 (set while one is open). */
  terminateOpenPoll?: () => void
}

export interface SentMessage {
  token: string
  chatId: string
  text: string
  replyTo?: number
}

export class FakeTelegram {
  readonly bots = new Map<string, FakeBot>()
  readonly sent: SentMessage[] = []
  readonly chatActions: Array<{ chatId: string; action: string }> = []
  /** Every method call: `getMe`, `getUpdates`, ... with the token. */
  readonly calls: Array<{ token: string; method: string }> = []
  #server?: Server
  readonly #waiters = new Set<() => void>()

  get url(): string {
    const address = this.#server?.address() as AddressInfo | null
    if (!address) throw new Error('fake Telegram not started')
    return `http://127.0.0.1:${address.port}`
  }

  /** Registers a bot; answers its token. */
  addBot(username: string): string {
    const id = 7_000_000_000 + this.bots.size + Math.floor(Math.random() * 1_000_000)
    const token = `${id}:AAH${Math.random().toString(36).slice(2).padEnd(30, 'x')}`
    this.bots.set(token, {
      id,
      username,
      revoked: false,
      webhookUrl: '',
      queue: [],
      nextUpdateId: 1000,
      nextMessageId: 1,
      polling: 0,
      conflicts: 0,
    })
    return token
  }

  /** A user writes to the bot; answers the update (as Telegram would deliver it). */
  userSays(
    token: string,
    text: string,
    options: { userId?: number; username?: string; chatId?: number; group?: boolean } = {}
  ) {
    const bot = this.bot(token)
    const userId = options.userId ?? 4242
    const update = {
      update_id: bot.nextUpdateId++,
      message: {
        message_id: bot.nextMessageId++,
        date: Math.floor(Date.now() / 1000),
        from: { id: userId, is_bot: false, first_name: 'Ada', username: options.username ?? 'ada' },
        chat: options.group
          ? { id: options.chatId ?? -100123, type: 'supergroup', title: 'Team' }
          : {
              id: options.chatId ?? userId,
              type: 'private',
              first_name: 'Ada',
              username: options.username ?? 'ada',
            },
        text,
      },
    }
    bot.queue.push(update)
    for (const wake of this.#waiters) wake()
    return update
  }

  bot(token: string): FakeBot {
    const bot = this.bots.get(token)
    if (!bot) throw new Error('unknown bot')
    return bot
  }

  repliesTo(token: string, chatId: number | string): SentMessage[] {
    return this.sent.filter((message) => message.token === token && message.chatId === `${chatId}`)
  }

  callsOf(token: string, method: string): number {
    return this.calls.filter((call) => call.token === token && call.method === method).length
  }

  async start(): Promise<this> {
    this.#server = createServer((request, response) => {
      this.#receive(request, response).catch((error) => {
        response.writeHead(500).end(String(error))
      })
    })
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve))
    return this
  }

  async close() {
    for (const wake of this.#waiters) wake()
    const server = this.#server
    this.#server = undefined
    if (!server) return
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  async #receive(request: IncomingMessage, response: ServerResponse) {
    const match = /^\/bot([^/]+)\/(\w+)$/.exec(new URL(request.url ?? '/', this.url).pathname)
    const chunks: Buffer[] = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    const raw = Buffer.concat(chunks).toString('utf8')
    const params = raw ? JSON.parse(raw) : {}
    if (!match) return this.#fail(response, 404, 'Not Found')
    const [, token, method] = match
    this.calls.push({ token, method })
    const bot = this.bots.get(token)
    if (!bot || bot.revoked) return this.#fail(response, 401, 'Unauthorized')

    switch (method) {
      case 'getMe':
        return this.#ok(response, {
          id: bot.id,
          is_bot: true,
          first_name: bot.username,
          username: bot.username,
          can_join_groups: true,
          can_read_all_group_messages: false,
          supports_inline_queries: false,
        })
      case 'setWebhook':
        bot.webhookUrl = String(params.url ?? '')
        return this.#ok(response, true)
      case 'deleteWebhook':
        bot.webhookUrl = ''
        if (params.drop_pending_updates) bot.queue = []
        return this.#ok(response, true)
      case 'getWebhookInfo':
        return this.#ok(response, { url: bot.webhookUrl, pending_update_count: bot.queue.length })
      case 'getUpdates':
        return this.#getUpdates(bot, params, response)
      case 'sendMessage': {
        this.sent.push({
          token,
          chatId: `${params.chat_id}`,
          text: String(params.text),
          replyTo: params.reply_parameters?.message_id,
        })
        return this.#ok(response, {
          message_id: bot.nextMessageId++,
          date: Math.floor(Date.now() / 1000),
          chat: { id: Number(params.chat_id), type: 'private' },
          from: { id: bot.id, is_bot: true, first_name: bot.username, username: bot.username },
          text: params.text,
        })
      }
      case 'sendChatAction':
        this.chatActions.push({ chatId: `${params.chat_id}`, action: String(params.action) })
        return this.#ok(response, true)
      default:
        return this.#fail(response, 404, 'Not Found: method not found')
    }
  }

  async #getUpdates(
    bot: FakeBot,
    params: { offset?: number; timeout?: number; limit?: number },
    response: ServerResponse
  ) {
    if (bot.webhookUrl) {
      return this.#fail(
        response,
        409,
        "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
      )
    }
    bot.terminateOpenPoll?.()
    // An offset confirms every update before it.
    if (params.offset) bot.queue = bot.queue.filter((update) => update.update_id >= params.offset!)
    bot.polling++
    // The poller went away (grammY aborts its open getUpdates on stop), or a newer call ended this one.
    let gone = false
    let terminated = false
    const end = () => {
      gone = true
      for (const wake of this.#waiters) wake()
    }
    response.once('close', end)
    const terminate = () => {
      terminated = true
      end()
    }
    bot.terminateOpenPoll = terminate
    try {
      const deadline = Date.now() + Math.min(params.timeout ?? 0, 50) * 1000
      while (bot.queue.length === 0 && Date.now() < deadline && !gone) {
        await new Promise<void>((resolve) => {
          const wake = () => {
            this.#waiters.delete(wake)
            clearTimeout(timer)
            resolve()
          }
          const timer = setTimeout(wake, Math.max(0, deadline - Date.now()))
          this.#waiters.add(wake)
        })
      }
    } finally {
      bot.polling--
      if (bot.terminateOpenPoll === terminate) bot.terminateOpenPoll = undefined
    }
    if (terminated && !response.destroyed) {
      bot.conflicts++
      return this.#fail(
        response,
        409,
        'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running'
      )
    }
    if (gone) return
    this.#ok(response, bot.queue.slice(0, params.limit ?? 100))
  }

  #ok(response: ServerResponse, result: unknown) {
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify({ ok: true, result }))
  }

  #fail(response: ServerResponse, code: number, description: string) {
    response.writeHead(code, { 'content-type': 'application/json' })
    response.end(JSON.stringify({ ok: false, error_code: code, description }))
  }
}
