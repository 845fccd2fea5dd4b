import type { IncomingMessage, ServerResponse } from 'node:http'
import { LocalHttpServer } from '#tests/helpers/local_http_server'

/**
 * A local token price API in the Jupiter Price API v3 form:
 * `GET /price/v3?ids=<mint>[,<mint>]` ->
 * `{ "<mint>": { "usdPrice": 1.0, "blockId": ..., "decimals": 6, "priceChange24h": ... } }`,
 * mints it has no price for left out.
 */
export class TokenPriceServer extends LocalHttpServer {
  prices: Record<string, { usdPrice: number; decimals: number }> = {}
  protected readonly path = '/price/v3'

  protected handle(url: URL, _request: IncomingMessage, response: ServerResponse) {
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
    this.json(response, body)
  }
}
