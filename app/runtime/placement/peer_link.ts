import { createHmac, timingSafeEqual } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  AgentNotRunningException,
  NotFoundException,
  PayloadTooLargeException,
  ServiceUnavailableException,
  ValidationException,
} from '#core/exceptions/api_exceptions'
import { BootCancelledError } from '#runtime/capacity/capacity_manager'

/** The peer no longer holds the agent (it stopped or handed it over meanwhile): look again. */
export class PeerMovedError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'PeerMovedError'
  }
}

/** The peer did not answer (it died, or is stopping): its agents are about to be adopted. */
export class PeerUnreachableError extends Error {
  constructor(cause: unknown) {
    super(`the instance holding the agent did not answer: ${(cause as Error).message}`)
    this.name = 'PeerUnreachableError'
  }
}

type Handler = (args: unknown[]) => Promise<unknown>

/** What an error looks like on the wire: enough to throw the same kind on the caller's side. */
interface WireError {
  name: string
  message: string
  status?: number
}

const API_ERRORS: Record<number, new (message?: string) => Error> = {
  400: ValidationException,
  404: NotFoundException,
  409: AgentNotRunningException,
  413: PayloadTooLargeException,
  503: ServiceUnavailableException,
}

function revive(error: WireError): Error {
  if (error.name === 'BootCancelledError') return new BootCancelledError()
  if (error.name === 'PeerMovedError') return new PeerMovedError(error.message)
  const Api = error.status ? API_ERRORS[error.status] : undefined
  return Api ? new Api(error.message) : new Error(error.message)
}

/** The bearer peers present: derived from APP_KEY, which every instance of the service shares. */
function peerToken(secret: string): string {
  return createHmac('sha256', secret).update('agent-host runtime peer link').digest('hex')
}

/**
 * The link between the service instances of one host: each listens on a
 * loopback port of its own (not the public one, which a process manager's
 * cluster mode shares between instances) for runtime operations on the
 * agents it holds, asked by the others (`POST /<operation>` with the
 * arguments as JSON, answered with the value or the error). Every call
 * carries a token derived from APP_KEY (agents in a network namespace of
 * their own cannot even reach the host's loopback; agents sharing the
 * host's network can, and are refused without it).
 */
export class PeerLink {
  readonly #handlers = new Map<string, Handler>()
  readonly #token: string
  #server?: http.Server
  #url?: string

  constructor(secret: string) {
    this.#token = peerToken(secret)
  }

  /** Serves `operation` to the other instances. */
  handle(operation: string, handler: Handler) {
    this.#handlers.set(operation, handler)
  }

  /** Where the others reach this instance (after listen). */
  get url(): string {
    if (!this.#url) throw new Error('the peer link is not listening')
    return this.#url
  }

  async listen(host = '127.0.0.1'): Promise<void> {
    const server = http.createServer((request, response) => void this.#serve(request, response))
    server.keepAliveTimeout = 30_000
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, host, () => resolve())
    })
    server.unref()
    this.#server = server
    this.#url = `http://${host}:${(server.address() as AddressInfo).port}`
  }

  async close(): Promise<void> {
    const server = this.#server
    this.#server = undefined
    if (!server) return
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  async #serve(request: http.IncomingMessage, response: http.ServerResponse) {
    const answer = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' })
      response.end(JSON.stringify(body))
    }
    const presented = Buffer.from(request.headers.authorization ?? '')
    const expected = Buffer.from(`Peer ${this.#token}`)
    if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) {
      return answer(401, { error: { name: 'Error', message: 'not a peer' } })
    }
    const handler = this.#handlers.get((request.url ?? '').slice(1))
    if (request.method !== 'POST' || !handler) {
      return answer(404, { error: { name: 'Error', message: 'unknown operation' } })
    }
    let text = ''
    for await (const chunk of request) text += chunk
    try {
      const { args } = JSON.parse(text) as { args: unknown[] }
      const value = await handler(args)
      answer(200, { value: value ?? null })
    } catch (error) {
      const failure = error as Error & { status?: number }
      // The class's own name: errors that set no `name` (BootCancelledError) are told apart too.
      const name = failure.constructor?.name ?? failure.name
      answer(200, { error: { name, message: failure.message, status: failure.status } })
    }
  }

  /**
   * Runs `operation` on the instance at `peerUrl`; its value, or the same
   * kind of error it threw. PeerUnreachableError when it does not answer.
   */
  async call<T>(
    peerUrl: string,
    operation: string,
    args: unknown[],
    timeoutMs = 30_000
  ): Promise<T> {
    let response: Response
    try {
      response = await fetch(`${peerUrl}/${operation}`, {
        method: 'POST',
        headers: { 'authorization': `Peer ${this.#token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ args }),
        signal: AbortSignal.timeout(timeoutMs),
      })
    } catch (error) {
      throw new PeerUnreachableError(error)
    }
    const body = (await response.json()) as { value?: T; error?: WireError }
    if (body.error) throw revive(body.error)
    return body.value as T
  }
}
