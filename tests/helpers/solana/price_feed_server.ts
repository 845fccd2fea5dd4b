import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A local USD price feed in the simple-price form:
 * `GET /?ids=solana,x&vs_currencies=usd` -> `{ "solana": { "usd": 142.1 } }`
 * (unknown ids are left out, as the real feed does).
 */
export class PriceFeedServer {
  /** USD prices by id. */
  prices: Record<string, number> = {}
  /** When set, every request answers this HTTP status (the feed is down). */
  failWithStatus: number | null = null
  readonly requests: URL[] = []
  private server?: Server

  constructor(prices: Record<string, number> = {}) {
    this.prices = { ...prices }
  }

  get url(): string {
    const address = this.server?.address() as AddressInfo | null
    if (!address) throw new Error('server not started')
    return `http://127.0.0.1:${address.port}/simple/price`
  }

  async start(): Promise<this> {
    this.server = createServer((request, response) => {
      const url = new URL(request.url ?? '/', 'http://127.0.0.1')
      this.requests.push(url)
      if (this.failWithStatus !== null) {
        response.writeHead(this.failWithStatus, { 'content-type': 'application/json' })
        response.end(JSON.stringify({ error: 'unavailable' }))
        return
      }
      const ids = (url.searchParams.get('ids') ?? '').split(',').filter(Boolean)
      const currencies = (url.searchParams.get('vs_currencies') ?? '').split(',')
      const body: Record<string, Record<string, number>> = {}
      for (const id of ids) {
        if (this.prices[id] !== undefined && currencies.includes('usd')) {
          body[id] = { usd: this.prices[id] }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(JSON.stringify(body))
    })
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve))
    return this
  }

  async close(): Promise<void> {
    const server = this.server
    this.server = undefined
    if (!server) return
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

export async function startPriceFeed(prices: Record<string, number>): Promise<PriceFeedServer> {
  return new PriceFeedServer(prices).start()
}
