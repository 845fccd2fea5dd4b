import type { IncomingMessage, ServerResponse } from 'node:http'
import { LocalHttpServer } from '#tests/helpers/local_http_server'

/**
 * A local USD price feed in the simple-price form:
 * `GET /?ids=solana,x&vs_currencies=usd` -> `{ "solana": { "usd": 142.1 } }`
 * (unknown ids are left out, as the real feed does).
 */
export class PriceFeedServer extends LocalHttpServer {
  /** USD prices by id. */
  prices: Record<string, number> = {}
  protected readonly path = '/simple/price'

  constructor(prices: Record<string, number> = {}) {
    super()
    this.prices = { ...prices }
  }

  protected handle(url: URL, _request: IncomingMessage, response: ServerResponse) {
    const ids = (url.searchParams.get('ids') ?? '').split(',').filter(Boolean)
    const currencies = (url.searchParams.get('vs_currencies') ?? '').split(',')
    const body: Record<string, Record<string, number>> = {}
    for (const id of ids) {
      if (this.prices[id] !== undefined && currencies.includes('usd')) {
        body[id] = { usd: this.prices[id] }
      }
    }
    this.json(response, body)
  }
}

export async function startPriceFeed(prices: Record<string, number>): Promise<PriceFeedServer> {
  return new PriceFeedServer(prices).start()
}
