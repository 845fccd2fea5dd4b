import { generateKeyPairSigner, type Address, type KeyPairSigner } from '@solana/kit'
import { LocalChain, type Mint } from '#tests/helpers/solana/local_chain'
import { startSolanaRpc, type SolanaRpcServer } from '#tests/helpers/solana/rpc_server'
import { startPriceFeed, type PriceFeedServer } from '#tests/helpers/solana/price_feed_server'
import type { PaymentEnvKey } from '#tests/helpers/solana/payment_env'

export const PLATFORM_PRICE_ID = 'agent-host-token'

/** The 25,000 AI Credit pack's price in USDC base units (30 USD). */
export const CREDITS_PACK_USDC = 30_000_000n

/**
 * `wallet` pays the 25,000 AI Credit pack in USDC on the local chain; answers
 * the `POST /features/addon` body that claims it.
 */
export async function payCreditsPack(
  standIns: Pick<PaymentStandIns, 'chain' | 'usdc' | 'treasury'>,
  wallet: KeyPairSigner
) {
  const tx = await standIns.chain.transferToken({
    mint: standIns.usdc,
    from: wallet,
    toOwner: standIns.treasury,
    amount: CREDITS_PACK_USDC,
  })
  return { addonKey: 'addon.ai_credits.25000', txSignature: tx.signature, paymentToken: 'usdc' }
}

/** The outside services payments need, played locally, and the settings that point at them. */
export interface PaymentStandIns {
  chain: LocalChain
  rpc: SolanaRpcServer
  prices: PriceFeedServer
  treasury: Address
  usdc: Mint
  platform: Mint
  /** The payment variables naming these stand-ins. */
  env: Partial<Record<PaymentEnvKey, string>>
  close(): Promise<void>
}

/**
 * Starts a local chain with a USDC mint (6 decimals) and a platform-token
 * mint (9 decimals), its RPC node and a price feed (SOL 150 USD, platform
 * token 0.02 USD). No application import: `npm run fuzz` starts these for a
 * service in another process.
 */
export async function startPaymentStandIns(): Promise<PaymentStandIns> {
  const chain = new LocalChain()
  const usdc = await chain.createMint(6)
  const platform = await chain.createMint(9)
  const treasurySigner = await generateKeyPairSigner()
  const treasury = treasurySigner.address
  const rpc = await startSolanaRpc(chain)
  const prices = await startPriceFeed({ solana: 150, [PLATFORM_PRICE_ID]: 0.02 })
  return {
    chain,
    rpc,
    prices,
    treasury,
    usdc,
    platform,
    env: {
      SOLANA_RPC_URL: rpc.url,
      TREASURY_ADDRESS: treasury,
      USDC_MINT: usdc.address,
      PLATFORM_TOKEN_MINT: platform.address,
      PLATFORM_TOKEN_PRICE_ID: PLATFORM_PRICE_ID,
      PRICE_API_URL: prices.url,
    },
    async close() {
      await Promise.all([rpc.close(), prices.close()])
    },
  }
}
