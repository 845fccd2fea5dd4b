import {
  decodeTransactionFromRpcResponse,
  getAccountMetasFromCompiledTransactionMessage,
  getInstructionsFromCompiledTransactionMessage,
  getSignatureFromTransaction,
  isSignature,
  isSignerRole,
  type Address,
  type Signature,
} from '@solana/kit'
import { SUPPORTED_MEMO_PROGRAM_ADDRESSES } from '@solana-program/memo'
import Payment from '#billing/models/payment'
import Quote from '#billing/models/quote'
import { PaymentRejectedException } from '#billing/services/payment_rejected'
import { usdPrice } from '#billing/services/price_feed'
import {
  baseUnitsForUsd,
  describePurchase,
  formatBaseUnits,
  purchaseUsdCents,
  samePurchase,
  withTolerance,
  type PaymentToken,
  type Purchase,
} from '#billing/services/pricing'
import {
  associatedTokenAddress,
  mintInfo,
  requireAddressSetting,
  rpcRequest,
  solanaRpc,
  TOKEN_PROGRAMS,
} from '#billing/services/solana_rpc'

/** A payment without a quote must have landed within this window (issue 5). */
export const PAYMENT_MAX_AGE_SECONDS = 30 * 60
/** SOL and platform-token payments may fall this far below the price-feed amount. */
export const PRICE_TOLERANCE_PERCENT = 2
/** Allowed difference between the validators' clock and ours. */
const CLOCK_SKEW_SECONDS = 60

const SOL_DECIMALS = 9

const tokenSymbols: Record<PaymentToken, string> = {
  sol: 'SOL',
  usdc: 'USDC',
  platform: 'platform tokens',
}

export interface VerifyPaymentInput {
  /** The transaction signature the client submitted (base58). */
  signature: string
  /** The account that claims the payment. */
  userId: string
  /** The wallet linked to the account, which must have signed unless a quote memo is present. */
  linkedWallet?: string | null
  token: PaymentToken
  purchase: Purchase
}

/** A payment that passed every check except replay (recorded with recordVerifiedPayment). */
export interface VerifiedPayment {
  signature: string
  userId: string
  token: PaymentToken
  /** Token mint (null for SOL). */
  mint: string | null
  decimals: number
  /** What reached the treasury, in base units (lamports for SOL). */
  amountBaseUnits: string
  /** The least amount that was accepted, in base units. */
  expectedBaseUnits: string
  /** Catalogue price of the purchase in USD. */
  usdValue: number
  purchase: Purchase
  /** The linked wallet when it signed, else the fee payer. */
  payer: string
  blockTime: Date
  slot: string
  /** How the payer was recognised: the linked wallet's signature or this account's quote memo. */
  via: 'wallet' | 'quote'
  quoteId: string | null
}

function reject(check: PaymentRejectedException['check'], message: string): never {
  throw new PaymentRejectedException(check, message)
}

const BASE58 = /^[1-9A-HJ-NP-Za-km-z]+$/

/**
 * Checks that `signature` is a finalized, successful transaction that paid
 * the treasury at least the price of `purchase` in `token`, by this account
 * (its linked wallet signed, or it carries the memo of this account's quote),
 * recently. Each failed check throws PaymentRejectedException (400) naming
 * it; a missing setting, an unreachable RPC node or price feed throws 503.
 * Replays are refused for good only by recordVerifiedPayment, in the
 * activation's database transaction.
 */
export async function verifyPayment(input: VerifyPaymentInput): Promise<VerifiedPayment> {
  const rpc = solanaRpc()
  const treasury = requireAddressSetting('TREASURY_ADDRESS')
  const mint =
    input.token === 'usdc'
      ? requireAddressSetting('USDC_MINT')
      : input.token === 'platform'
        ? requireAddressSetting('PLATFORM_TOKEN_MINT')
        : null
  const usdCents = purchaseUsdCents(input.purchase)

  // kit's isSignature throws (not false) on characters outside base58: check them first.
  if (!BASE58.test(input.signature) || !isSignature(input.signature)) {
    reject('signature', 'txSignature is not a valid Solana transaction signature')
  }
  const signature: Signature = input.signature

  if (await Payment.findBy('signature', signature)) {
    reject('replay', 'This transaction was already used for a payment')
  }

  const response = await rpcRequest(() =>
    rpc
      .getTransaction(signature, {
        commitment: 'finalized',
        encoding: 'base64',
        maxSupportedTransactionVersion: 0,
      })
      .send()
  )
  if (!response) {
    const { value } = await rpcRequest(() =>
      rpc.getSignatureStatuses([signature], { searchTransactionHistory: true }).send()
    )
    const status = value[0]
    if (status && status.err) {
      reject('succeeded', 'The transaction failed on-chain, so it paid nothing')
    }
    if (status) {
      reject(
        'finalized',
        `The transaction is not finalized yet (it is ${status.confirmationStatus ?? 'processed'}); submit it again once it is finalized`
      )
    }
    reject('not_found', 'The transaction was not found on the Solana network')
  }

  const meta = response.meta
  if (!meta) reject('not_found', 'The Solana node returned the transaction without its status')
  if (meta.err !== null) {
    reject('succeeded', 'The transaction failed on-chain, so it paid nothing')
  }

  const { compiledMessage, loadedAddresses, transaction } =
    decodeTransactionFromRpcResponse(response)
  if (getSignatureFromTransaction(transaction) !== signature) {
    reject('not_found', 'The Solana node returned a different transaction for this signature')
  }
  const accountMetas = getAccountMetasFromCompiledTransactionMessage(
    compiledMessage,
    loadedAddresses
  )
  const accountKeys = accountMetas.map((account) => account.address)
  const signers = accountMetas
    .filter((account) => isSignerRole(account.role))
    .map((account) => account.address)
  const memos = getInstructionsFromCompiledTransactionMessage(compiledMessage, loadedAddresses)
    .filter((ix) =>
      (SUPPORTED_MEMO_PROGRAM_ADDRESSES as readonly Address[]).includes(ix.programAddress)
    )
    .map((ix) => Buffer.from(ix.data ?? new Uint8Array()).toString('utf8'))

  // Who paid: this account's quote memo, else the linked wallet's signature.
  const quotes = memos.length > 0 ? await Quote.query().whereIn('memo', memos) : []
  const quote = quotes.find((candidate) => candidate.userId === input.userId) ?? null
  if (!quote && quotes.length > 0) {
    reject('payer', 'The transaction carries the memo of a quote issued to another account')
  }
  const walletSigned = !!input.linkedWallet && signers.includes(input.linkedWallet as Address)
  if (!quote && !walletSigned) {
    reject(
      'payer',
      input.linkedWallet
        ? 'The transaction was not signed by the wallet linked to this account and carries no quote memo of this account'
        : 'No wallet is linked to this account and the transaction carries no quote memo of this account'
    )
  }

  if (response.blockTime === null) {
    reject('block_time', 'The transaction has no block time, so its age cannot be checked')
  }
  const blockTime = Number(response.blockTime)
  const now = Math.floor(Date.now() / 1000)
  if (quote) {
    if (quote.token !== input.token) {
      reject(
        'quote',
        `The quote in this transaction's memo is for ${tokenSymbols[quote.token]}, not ${tokenSymbols[input.token]}`
      )
    }
    if (!samePurchase(quote.purchase, input.purchase)) {
      reject(
        'quote',
        `The quote in this transaction's memo is for ${describePurchase(quote.purchase)}, not ${describePurchase(input.purchase)}`
      )
    }
    if (quote.usedAt)
      reject('quote', "The quote in this transaction's memo was already used for a payment")
    const opens = Math.floor(quote.createdAt.toSeconds()) - CLOCK_SKEW_SECONDS
    const closes = Math.floor(quote.expiresAt.toSeconds()) + CLOCK_SKEW_SECONDS
    if (blockTime < opens || blockTime > closes) {
      reject(
        'block_time',
        'The transaction was not made while its quote was valid (quotes last 15 minutes)'
      )
    }
  } else if (now - blockTime > PAYMENT_MAX_AGE_SECONDS || blockTime - now > CLOCK_SKEW_SECONDS) {
    reject('block_time', 'The transaction is older than 30 minutes; request a quote to pay later')
  }

  // What reached the treasury.
  let received: bigint
  let decimals = SOL_DECIMALS
  const symbol = tokenSymbols[input.token]
  if (mint === null) {
    const index = accountKeys.indexOf(treasury)
    if (index < 0)
      reject('recipient', 'The transaction did not pay the treasury (TREASURY_ADDRESS)')
    received = BigInt(meta.postBalances[index]) - BigInt(meta.preBalances[index])
  } else {
    const info = await mintInfo(mint, input.token === 'usdc' ? 'USDC_MINT' : 'PLATFORM_TOKEN_MINT')
    decimals = info.decimals
    const arrivals = []
    for (const post of meta.postTokenBalances ?? []) {
      if (post.mint !== mint || post.owner !== treasury) continue
      if (!post.programId || !TOKEN_PROGRAMS.includes(post.programId)) continue
      const account = accountKeys[post.accountIndex]
      // Only the treasury's associated token account counts (the one wallets pay into).
      if (account !== (await associatedTokenAddress(treasury, mint, post.programId))) continue
      arrivals.push(post)
    }
    const post = arrivals[0]
    if (!post) {
      reject('recipient', `The transaction did not pay ${symbol} into the treasury's token account`)
    }
    if (post.uiTokenAmount.decimals !== decimals) {
      reject(
        'decimals',
        `The transaction moved a token with ${post.uiTokenAmount.decimals} decimals; ${symbol} have ${decimals}`
      )
    }
    // A token account created by this transaction has no pre balance: it counts from 0.
    const pre = (meta.preTokenBalances ?? []).find((b) => b.accountIndex === post.accountIndex)
    received = BigInt(post.uiTokenAmount.amount) - BigInt(pre?.uiTokenAmount.amount ?? '0')
  }
  if (received <= 0n) {
    reject('recipient', `The transaction moved no ${symbol} to the treasury`)
  }

  // What was due: the quoted amount exactly, else the catalogue price (USDC 1:1,
  // SOL and the platform token at the feed price within the tolerance).
  let minimum: bigint
  let due: string
  if (quote) {
    minimum = BigInt(quote.amountBaseUnits)
    due = `${formatBaseUnits(minimum, decimals)} ${symbol} as quoted`
  } else if (input.token === 'usdc') {
    minimum = baseUnitsForUsd(usdCents, 1, decimals)
    due = `${formatBaseUnits(minimum, decimals)} USDC`
  } else {
    const price = await usdPrice(input.token)
    const expected = baseUnitsForUsd(usdCents, price, decimals)
    minimum = withTolerance(expected, PRICE_TOLERANCE_PERCENT)
    due = `${formatBaseUnits(expected, decimals)} ${symbol} (${usdCents / 100} USD at ${price} USD each, ${PRICE_TOLERANCE_PERCENT}% tolerance)`
  }
  if (received < minimum) {
    reject(
      'amount',
      `The transaction paid ${formatBaseUnits(received, decimals)} ${symbol} to the treasury; ${due} was due for ${describePurchase(input.purchase)}`
    )
  }

  return {
    signature,
    userId: input.userId,
    token: input.token,
    mint,
    decimals,
    amountBaseUnits: received.toString(),
    expectedBaseUnits: minimum.toString(),
    usdValue: usdCents / 100,
    purchase: input.purchase,
    payer: walletSigned ? (input.linkedWallet as string) : accountKeys[0],
    blockTime: new Date(blockTime * 1000),
    slot: response.slot.toString(),
    via: quote ? 'quote' : 'wallet',
    quoteId: quote?.id ?? null,
  }
}
