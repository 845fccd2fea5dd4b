import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A stand-in HTTP service on 127.0.0.1 (a free port): subclasses answer
 * `handle`; `failWithStatus` makes every request answer that status with a
 * JSON error (the service is down); `requests` records each URL.
 */
export abstract class LocalHttpServer {
  failWithStatus: number | null = null
  readonly requests: URL[] = []
  private server?: Server

  /** Path the service is reached at, appended to the origin in `url`. */
  protected abstract readonly path: string

  protected abstract handle(url: URL, request: IncomingMessage, response: ServerResponse): void

  get url(): string {
    const address = this.server?.address() as AddressInfo | null
    if (!address) throw new Error('server not started')
    return `http://127.0.0.1:${address.port}${this.path}`
  }

  /** Listens on `port` (0: a free one); a closed server may start again on its old port. */
  async start(port = 0): Promise<this> {
    this.server = createServer((request, response) => {
      const url = new URL(request.url ?? '/', 'http://127.0.0.1')
      this.requests.push(url)
      if (this.failWithStatus !== null) {
        response.writeHead(this.failWithStatus, { 'content-type': 'application/json' })
        response.end(JSON.stringify({ error: 'unavailable' }))
        return
      }
      this.handle(url, request, response)
    })
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve))
    return this
  }

  async close(): Promise<void> {
    const server = this.server
    this.server = undefined
    if (!server) return
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  protected json(response: ServerResponse, body: unknown): void {
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify(body))
  }
}
