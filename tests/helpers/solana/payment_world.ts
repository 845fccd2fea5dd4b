import { generateKeyPairSigner, type Address } from '@solana/kit'
import { clearPriceCache } from '#billing/services/price_feed'
import { LocalChain, type Mint } from '#tests/helpers/solana/local_chain'
import { startSolanaRpc, type SolanaRpcServer } from '#tests/helpers/solana/rpc_server'
import { startPriceFeed, type PriceFeedServer } from '#tests/helpers/solana/price_feed_server'
import { setPaymentEnv } from '#tests/helpers/solana/payment_env'
import { createUser } from '#tests/helpers/identity'

export const PLATFORM_PRICE_ID = 'agent-host-token'

/** Everything a payment test needs: a chain, its RPC node, a price feed, the configured addresses. */
export interface PaymentWorld {
  chain: LocalChain
  rpc: SolanaRpcServer
  prices: PriceFeedServer
  treasury: Address
  usdc: Mint
  platform: Mint
  close(): Promise<void>
}

/**
 * Starts a local chain with a USDC mint (6 decimals) and a platform-token
 * mint (9 decimals), its RPC node and a price feed (SOL 150 USD, platform
 * token 0.02 USD), and points the payment variables at them until close().
 */
export async function startPaymentWorld(): Promise<PaymentWorld> {
  const chain = new LocalChain()
  const usdc = await chain.createMint(6)
  const platform = await chain.createMint(9)
  const treasurySigner = await generateKeyPairSigner()
  const treasury = treasurySigner.address
  const rpc = await startSolanaRpc(chain)
  const prices = await startPriceFeed({ solana: 150, [PLATFORM_PRICE_ID]: 0.02 })
  const restoreEnv = setPaymentEnv({
    SOLANA_RPC_URL: rpc.url,
    TREASURY_ADDRESS: treasury,
    USDC_MINT: usdc.address,
    PLATFORM_TOKEN_MINT: platform.address,
    PLATFORM_TOKEN_PRICE_ID: PLATFORM_PRICE_ID,
    PRICE_API_URL: prices.url,
  })
  await clearPriceCache()
  return {
    chain,
    rpc,
    prices,
    treasury,
    usdc,
    platform,
    async close() {
      restoreEnv()
      await clearPriceCache()
      await Promise.all([rpc.close(), prices.close()])
    },
  }
}

/** A real account's id (quotes and payments reference users). */
export async function newAccountId(): Promise<string> {
  const user = await createUser()
  return user.id
}
