import redis from '@adonisjs/redis/services/main'
import env from '#start/env'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import { requirePaymentSetting } from '#billing/services/payment_config'
import type { PaymentToken } from '#billing/services/pricing'

/** A price is used for at most this long after it was fetched (issue 5: "cached at most 60 s"). */
export const PRICE_CACHE_SECONDS = 60
const FETCH_TIMEOUT_MS = 5_000

const tokenNames: Record<PaymentToken, string> = {
  sol: 'SOL',
  usdc: 'USDC',
  platform: 'the platform token',
}

interface CachedPrice {
  usd: number
  fetchedAt: number
}

const localCache = new Map<string, CachedPrice>()
const inFlight = new Map<string, Promise<number>>()

/**
 * The shared Redis connection (config/redis.ts) when REDIS_URL is set, so
 * instances behind one Redis ask the feed once a minute between them.
 */
function redisConnection() {
  return env.get('REDIS_URL') ? redis : undefined
}

/** Forgets every cached price (tests; an operator switching feeds). */
export async function clearPriceCache(): Promise<void> {
  localCache.clear()
  const connection = redisConnection()
  if (!connection) return
  try {
    const keys = await connection.keys('billing:usd-price:*')
    if (keys.length > 0) await connection.del(...keys)
  } catch {}
}

// A Redis outage must not fail payments: cache errors fall back to the feed.
async function readCache(id: string): Promise<number | undefined> {
  const connection = redisConnection()
  if (connection) {
    try {
      const value = await connection.get(`billing:usd-price:${id}`)
      if (value !== null && Number(value) > 0) return Number(value)
    } catch {}
  }
  const local = localCache.get(id)
  if (local && Date.now() - local.fetchedAt < PRICE_CACHE_SECONDS * 1000) return local.usd
  return undefined
}

async function writeCache(id: string, usd: number): Promise<void> {
  localCache.set(id, { usd, fetchedAt: Date.now() })
  const connection = redisConnection()
  if (!connection) return
  try {
    await connection.set(`billing:usd-price:${id}`, String(usd), 'EX', PRICE_CACHE_SECONDS)
  } catch {}
}

/** The price-feed id of a token: SOL is `solana`, the platform token's id is configured. */
function priceId(token: Exclude<PaymentToken, 'usdc'>): string {
  return token === 'sol' ? 'solana' : requirePaymentSetting('PLATFORM_TOKEN_PRICE_ID')
}

async function fetchPrice(token: PaymentToken, id: string): Promise<number> {
  const url = new URL(requirePaymentSetting('PRICE_API_URL'))
  url.searchParams.set('ids', id)
  url.searchParams.set('vs_currencies', 'usd')
  const unavailable = (reason: string) =>
    new ServiceUnavailableException(
      `The USD price of ${tokenNames[token]} is unavailable right now (${reason}), so the payment amount cannot be checked; try again shortly`
    )
  let body: unknown
  try {
    const response = await fetch(url, {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    })
    if (!response.ok) throw unavailable(`the price feed answered HTTP ${response.status}`)
    body = await response.json()
  } catch (error) {
    if (error instanceof ServiceUnavailableException) throw error
    throw unavailable('the price feed could not be reached')
  }
  const usd = (body as Record<string, { usd?: unknown } | undefined> | null)?.[id]?.usd
  if (typeof usd !== 'number' || !Number.isFinite(usd) || usd <= 0) {
    throw unavailable(`the price feed has no USD price for "${id}"`)
  }
  return usd
}

/**
 * The USD price of one whole token. USDC is 1:1; SOL and the platform token
 * come from PRICE_API_URL, cached at most 60 s. With no price available this
 * throws 503: a payment is never checked against a guessed price.
 */
export async function usdPrice(token: PaymentToken): Promise<number> {
  if (token === 'usdc') return 1
  const id = priceId(token)
  const cached = await readCache(id)
  if (cached !== undefined) return cached

  // Concurrent requests in one process share one fetch.
  let pending = inFlight.get(id)
  if (!pending) {
    pending = fetchPrice(token, id)
      .then(async (usd) => {
        await writeCache(id, usd)
        return usd
      })
      .finally(() => inFlight.delete(id))
    inFlight.set(id, pending)
  }
  return pending
}
