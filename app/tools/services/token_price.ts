import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import { requireToolSetting } from '#tools/services/tool_settings'

const FETCH_TIMEOUT_MS = 5_000

/**
 * The USD price of a token by mint from TOKEN_PRICE_API_URL, in the Jupiter
 * Price API v3 form: `GET <url>?ids=<mint>` -> `{ "<mint>": { "usdPrice": 1.0, ... } }`.
 * A mint the API does not know is left out of the answer: null here.
 */
export async function tokenUsdPrice(mint: string): Promise<number | null> {
  const url = new URL(requireToolSetting('TOKEN_PRICE_API_URL', 'Token scanning'))
  url.searchParams.set('ids', mint)
  const unavailable = (reason: string) =>
    new ServiceUnavailableException(
      `The token price API is unavailable (${reason}); try again shortly`
    )
  let body: unknown
  try {
    const response = await fetch(url, {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    })
    if (!response.ok) throw unavailable(`it answered HTTP ${response.status}`)
    body = await response.json()
  } catch (error) {
    if (error instanceof ServiceUnavailableException) throw error
    throw unavailable('it could not be reached or answered something unreadable')
  }
  if (!body || typeof body !== 'object') throw unavailable('it answered something unreadable')
  const price = (body as Record<string, { usdPrice?: unknown } | null | undefined>)[mint]?.usdPrice
  return typeof price === 'number' && Number.isFinite(price) && price >= 0 ? price : null
}
