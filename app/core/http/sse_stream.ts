import { once } from 'node:events'
import type { HttpContext } from '@adonisjs/core/http'

/** Comment line sent this often so proxies keep an idle stream open. */
export const SSE_HEARTBEAT_MS = 15_000

/**
 * A `text/event-stream` answer written straight to the Node response (no
 * buffering, nothing for the envelope middleware to wrap: once the headers
 * are out, Adonis leaves the response alone). Headers already set on the
 * Adonis response (request id, CORS) go out with it. A comment heartbeat
 * keeps idle proxies from closing the stream.
 */
export class SseStream {
  #heartbeat?: NodeJS.Timeout
  #opened = false

  constructor(
    private readonly ctx: HttpContext,
    private readonly options: { heartbeatMs?: number } = {}
  ) {}

  get opened(): boolean {
    return this.#opened
  }

  /** True once the client is gone or the stream was ended. */
  get closed(): boolean {
    const raw = this.ctx.response.response
    return raw.writableEnded || raw.destroyed
  }

  open(): void {
    if (this.#opened) return
    this.#opened = true
    const raw = this.ctx.response.response
    raw.writeHead(200, {
      ...this.ctx.response.getHeaders(),
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      'connection': 'keep-alive',
      'x-accel-buffering': 'no',
    })
    raw.flushHeaders()
    raw.socket?.setNoDelay(true)
    this.#heartbeat = setInterval(
      () => this.comment('heartbeat'),
      this.options.heartbeatMs ?? SSE_HEARTBEAT_MS
    )
    this.#heartbeat.unref()
    raw.once('close', () => clearInterval(this.#heartbeat))
  }

  comment(text: string): void {
    if (!this.closed) this.ctx.response.response.write(`: ${text}\n\n`)
  }

  /** One `data:` event with the JSON of `payload`. */
  send(payload: unknown): void {
    this.sendData(JSON.stringify(payload))
  }

  /** One `data:` event with a payload that is already a single line (JSON). */
  sendData(data: string): void {
    if (!this.closed) this.ctx.response.response.write(`data: ${data}\n\n`)
  }

  /**
   * One event whose `data:` lines are the lines of `text` (log lines may hold
   * line breaks). Resolves once the socket takes more, so a fast producer
   * cannot fill memory behind a slow client.
   */
  async sendText(text: string, signal?: AbortSignal): Promise<void> {
    if (this.closed) return
    const event = text
      .split(/\r?\n|\r/)
      .map((part) => `data: ${part}`)
      .join('\n')
    const raw = this.ctx.response.response
    if (!raw.write(`${event}\n\n`)) {
      await once(raw, 'drain', { signal }).catch(() => {})
    }
  }

  /** A named event (`event: name`), for failures in line-based streams. */
  event(name: string, data: string): void {
    if (!this.closed) this.ctx.response.response.write(`event: ${name}\ndata: ${data}\n\n`)
  }

  /** `data: [DONE]` and the end of the answer. */
  done(): void {
    this.sendData('[DONE]')
    this.end()
  }

  /** `data: {"error": message}` then `data: [DONE]` (a failure after the stream began). */
  fail(message: string): void {
    this.send({ error: message })
    this.done()
  }

  end(): void {
    clearInterval(this.#heartbeat)
    const raw = this.ctx.response.response
    if (!raw.writableEnded) raw.end()
  }
}

/**
 * An AbortController aborted when the client closes the connection before
 * the answer was completely sent (model calls take it as their signal).
 */
export function abortOnDisconnect(ctx: HttpContext): AbortController {
  const controller = new AbortController()
  const raw = ctx.response.response
  raw.once('close', () => {
    if (!raw.writableFinished) controller.abort(new Error('client disconnected'))
  })
  return controller
}
