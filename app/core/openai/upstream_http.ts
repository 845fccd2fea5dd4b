import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http'
import https from 'node:https'

/**
 * A small HTTP client for model providers (the hosted upstream and
 * customer-key providers): keep-alive connections (fetch adds about a
 * millisecond per call on this path), an AbortSignal that closes the
 * connection at once (the provider sees the client go and stops
 * generating), and a timeout until the answer starts.
 */
const keepAlive = {
  http: new http.Agent({ keepAlive: true, maxSockets: 512 }),
  https: new https.Agent({ keepAlive: true, maxSockets: 512 }),
}

/** The provider could not be reached, timed out, or broke the connection. */
export class UpstreamUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'UpstreamUnavailableError'
  }
}

export interface UpstreamResponse {
  status: number
  headers: IncomingHttpHeaders
  /** The body as it arrives (for streams). */
  body: IncomingMessage
  /** The whole body as text (the timeout keeps running until it is read). */
  text(): Promise<string>
  /** The whole body parsed as JSON; undefined when it is not JSON. */
  json(): Promise<any>
  /**
   * The answer started and will be read as a stream: the whole-answer
   * timeout stops and the idle one (`idleTimeoutMs`) starts.
   */
  streaming(): void
}

export interface UpstreamRequest {
  method?: 'GET' | 'POST'
  headers?: Record<string, string>
  body?: unknown
  signal?: AbortSignal
  /** Longest wait for the status line (and for text()/json(), the whole body). */
  timeoutMs: number
  /** A stream that sends nothing for this long is broken off (default: `timeoutMs`). */
  idleTimeoutMs?: number
}

function abortReason(signal: AbortSignal): Error {
  const reason = signal.reason
  return reason instanceof Error ? reason : new Error('aborted')
}

/**
 * Errors of a kept-alive connection the other side no longer has: the
 * request never reached a live server (an agent restored from its
 * checkpoint closed the connections it had; a server closed an idle one).
 */
const STALE_CONNECTION = new Set(['ECONNRESET', 'EPIPE'])

export function upstreamRequest(url: string, options: UpstreamRequest): Promise<UpstreamResponse> {
  return send(url, options, false)
}

function send(url: string, options: UpstreamRequest, fresh: boolean): Promise<UpstreamResponse> {
  const target = new URL(url)
  const client = target.protocol === 'https:' ? https : http
  const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body))
  const { signal } = options

  return new Promise<UpstreamResponse>((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal))

    const request = client.request(target, {
      method: options.method ?? (payload ? 'POST' : 'GET'),
      // `false`: a connection of its own (the pool may hold more stale ones).
      agent: fresh ? false : target.protocol === 'https:' ? keepAlive.https : keepAlive.http,
      headers: {
        ...(payload
          ? { 'content-type': 'application/json', 'content-length': String(payload.length) }
          : {}),
        ...options.headers,
      },
    })
    let settled = false
    let answer: IncomingMessage | undefined
    // The answer's body fails with the reason too (else a reader sees only "aborted").
    const breakOff = (reason: Error) => {
      answer?.destroy(reason)
      request.destroy(reason)
    }
    const timer = setTimeout(() => {
      breakOff(
        new UpstreamUnavailableError(`no answer within ${Math.round(options.timeoutMs / 1000)} s`)
      )
    }, options.timeoutMs)
    const onAbort = () => breakOff(abortReason(signal!))
    signal?.addEventListener('abort', onAbort, { once: true })
    const cleanup = () => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
    }

    request.on('error', (error) => {
      cleanup()
      if (settled) return
      settled = true
      if (signal?.aborted) return reject(abortReason(signal))
      const code = (error as NodeJS.ErrnoException).code ?? ''
      // Node's own advice for kept-alive connections: asked once more, on a new connection.
      if (request.reusedSocket && !fresh && STALE_CONNECTION.has(code)) {
        return resolve(send(url, options, true))
      }
      reject(
        error instanceof UpstreamUnavailableError
          ? error
          : new UpstreamUnavailableError(`unreachable: ${error.message}`, { cause: error })
      )
    })
    request.on('response', (response) => {
      settled = true
      answer = response
      // Keep honouring the signal while the body streams.
      response.on('close', cleanup)
      let textPromise: Promise<string> | undefined
      const text = () =>
        (textPromise ??= new Promise<string>((resolveText, rejectText) => {
          const chunks: Buffer[] = []
          response.on('data', (chunk: Buffer) => chunks.push(chunk))
          response.on('end', () => {
            cleanup()
            resolveText(Buffer.concat(chunks).toString('utf8'))
          })
          response.on('error', (error) => {
            cleanup()
            rejectText(
              signal?.aborted
                ? abortReason(signal)
                : new UpstreamUnavailableError(`answer broke off: ${error.message}`, {
                    cause: error,
                  })
            )
          })
        }))
      resolve({
        status: response.statusCode ?? 0,
        headers: response.headers,
        body: response,
        text,
        async json() {
          const raw = await text()
          try {
            return JSON.parse(raw)
          } catch {
            return undefined
          }
        },
        streaming() {
          clearTimeout(timer)
          // A stream that stalls must not hold its caller (and its credits) forever.
          const idleMs = options.idleTimeoutMs ?? options.timeoutMs
          request.setTimeout(idleMs, () =>
            breakOff(
              new UpstreamUnavailableError(
                `the stream stalled: nothing for ${Math.round(idleMs / 1000)} s`
              )
            )
          )
          response.once('close', () => request.setTimeout(0))
        },
      })
    })
    request.end(payload)
  })
}
