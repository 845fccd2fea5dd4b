import { randomBytes } from 'node:crypto'
import { DateTime } from 'luxon'
import Quote from '#billing/models/quote'
import { usdPrice } from '#billing/services/price_feed'
import {
  baseUnitsForUsd,
  formatBaseUnits,
  purchaseUsdCents,
  type PaymentToken,
  type Purchase,
} from '#billing/services/pricing'
import { mintInfo, requireAddressSetting } from '#billing/services/solana_rpc'

/** How long a quote's amount holds (issue 5). */
export const QUOTE_TTL_MINUTES = 15

/** A quote as answered to the client. */
export interface QuoteView {
  quoteId: string
  token: PaymentToken
  /** Exact amount in whole tokens, as a decimal string ("0.049226"). */
  amount: string
  /** Exact amount in base units (lamports for SOL), as a decimal string. */
  amountBaseUnits: string
  decimals: number
  /** The token mint (null for SOL). */
  mint: string | null
  /** Where to pay: the treasury for SOL; its associated token account's owner for tokens. */
  recipient: string
  /** The memo the payment transaction must carry. */
  memo: string
  usdValue: number
  /** USD per whole token used for the amount. */
  tokenUsdPrice: number
  purchase: Purchase
  expiresAt: string
}

/** A memo nobody can guess: 144 random bits. */
function newMemo(): string {
  return `agent-host:${randomBytes(18).toString('base64url')}`
}

/**
 * Quotes an exact amount of `token` for `purchase` to one account, valid 15
 * minutes: a payment carrying the memo is checked against this amount
 * (instead of the live price) and counts as paid by this account whoever
 * signed it. SOL and platform-token amounts use the price feed (503 when no
 * price is available), USDC is 1:1.
 */
export async function createQuote(input: {
  userId: string
  purchase: Purchase
  token: PaymentToken
}): Promise<QuoteView> {
  const treasury = requireAddressSetting('TREASURY_ADDRESS')
  const usdCents = purchaseUsdCents(input.purchase)
  let mint: string | null = null
  let decimals = 9
  if (input.token !== 'sol') {
    const setting = input.token === 'usdc' ? 'USDC_MINT' : 'PLATFORM_TOKEN_MINT'
    const address = requireAddressSetting(setting)
    const info = await mintInfo(address, setting)
    decimals = info.decimals
    mint = address
  }
  const price = await usdPrice(input.token)
  const amount = baseUnitsForUsd(usdCents, price, decimals)

  const quote = await Quote.create({
    userId: input.userId,
    purchaseKind: input.purchase.kind,
    purchaseKey: input.purchase.key,
    billingPeriod: input.purchase.billingPeriod,
    token: input.token,
    mint,
    decimals,
    amountBaseUnits: amount.toString(),
    usdValue: usdCents / 100,
    tokenUsdPrice: price,
    memo: newMemo(),
    expiresAt: DateTime.utc().plus({ minutes: QUOTE_TTL_MINUTES }),
  })
  return quoteView(quote, treasury)
}

/** The quote that carries `memo`, if any (the verifier's lookup). */
export async function findQuoteByMemo(memo: string): Promise<Quote | null> {
  return Quote.findBy('memo', memo)
}

export function quoteView(quote: Quote, treasury: string): QuoteView {
  const amount = BigInt(quote.amountBaseUnits)
  return {
    quoteId: quote.id,
    token: quote.token,
    amount: formatBaseUnits(amount, quote.decimals),
    amountBaseUnits: amount.toString(),
    decimals: quote.decimals,
    mint: quote.mint,
    recipient: treasury,
    memo: quote.memo,
    usdValue: quote.usdValue,
    tokenUsdPrice: quote.tokenUsdPrice,
    purchase: quote.purchase,
    expiresAt: quote.expiresAt.toUTC().toISO()!,
  }
}
