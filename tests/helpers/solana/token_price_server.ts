import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A local token price API in the Jupiter Price API v3 form:
 * `GET /price/v3?ids=<mint>[,<mint>]` ->
 * `{ "<mint>": { "usdPrice": 1.0, "blockId": ..., "decimals": 6, "priceChange24h": ... } }`,
 * mints it has no price for left out.
 */
export class TokenPriceServer {
  prices: Record<string, { usdPrice: number; decimals: number }> = {}
  failWithStatus: number | null = null
  readonly requests: URL[] = []
  private server?: Server

  get url(): string {
    const address = this.server?.address() as AddressInfo | null
    if (!address) throw new Error('server not started')
    return `http://127.0.0.1:${address.port}/price/v3`
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
      const body: Record<string, unknown> = {}
      for (const id of (url.searchParams.get('ids') ?? '').split(',').filter(Boolean)) {
        const known = this.prices[id]
        if (known) {
          body[id] = {
            usdPrice: known.usdPrice,
            blockId: 348_004_022,
            decimals: known.decimals,
            priceChange24h: -0.42,
          }
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
