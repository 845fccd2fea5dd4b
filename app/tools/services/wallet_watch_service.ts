import { address as toAddress, signature as toSignature, type Address } from '@solana/kit'
import db from '@adonisjs/lucid/services/db'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'
import { cacheClear, cached } from '#core/cache/shared_cache'
import { usdPrice } from '#billing/services/price_feed'
import { rpcRequest as rpcCall } from '#billing/services/solana_rpc'
import type Agent from '#agents/models/agent'
import { toolsRpc } from '#tools/services/solana_client'
import { requireToolSetting } from '#tools/services/tool_settings'

/** Spec "Watched wallet". */
export interface WatchedWallet {
  address: string
  balance: { sol: number; usd: number }
  transactions: WalletTransaction[]
}

export interface WalletTransaction {
  signature: string
  /** `in`: the wallet's SOL grew; `out`: it shrank by more than the fee; `other`: neither (token moves, program calls). */
  type: 'in' | 'out' | 'other'
  /** SOL moved for the wallet, the fee it paid left out. */
  amount: number
  ts: number
}

/** Recent transactions listed per wallet. */
export const RECENT_TRANSACTIONS = 10
/** A wallet's chain view is reused this long: a page load costs at most one round of RPC calls. */
export const WALLET_CACHE_SECONDS = 30
const PURPOSE = 'Wallet watching'
const LAMPORTS_PER_SOL = 1_000_000_000

const CACHE_PREFIX = 'tools:wallet:'

/** What the chain says of a wallet, as cached (JSON: lamports as a decimal string). */
interface ChainView {
  lamports: string
  transactions: WalletTransaction[]
}

/** Forgets cached wallet views (tests). */
export function clearWalletCache(): Promise<void> {
  return cacheClear(CACHE_PREFIX)
}

async function walletsOf(agentId: string): Promise<string[]> {
  const rows = await db
    .from('watched_wallets')
    .where('agent_id', agentId)
    .orderBy('position', 'asc')
    .select('address')
  return rows.map((row) => row.address as string)
}

/** One transaction as the wallet saw it, from a jsonParsed getTransaction answer. */
function classify(
  wallet: string,
  signature: string,
  tx: any,
  blockTime: number | null
): WalletTransaction {
  const keys: string[] = (tx?.transaction?.message?.accountKeys ?? []).map((key: any) =>
    String(typeof key === 'string' ? key : key?.pubkey)
  )
  const index = keys.indexOf(wallet)
  const pre = index >= 0 ? BigInt(tx?.meta?.preBalances?.[index] ?? 0) : 0n
  const post = index >= 0 ? BigInt(tx?.meta?.postBalances?.[index] ?? 0) : 0n
  // The fee payer is the first account: its fee is not an outgoing payment.
  const fee = index === 0 ? BigInt(tx?.meta?.fee ?? 0) : 0n
  const delta = post - pre + fee
  const type = delta > 0n ? 'in' : delta < 0n ? 'out' : 'other'
  const magnitude = delta < 0n ? -delta : delta
  return {
    signature,
    type,
    amount: Number(magnitude) / LAMPORTS_PER_SOL,
    ts: Number(tx?.blockTime ?? blockTime ?? 0),
  }
}

async function chainView(wallet: Address): Promise<ChainView> {
  const rpc = toolsRpc(PURPOSE)
  const [balance, signatures] = await Promise.all([
    rpcCall(() => rpc.getBalance(wallet, { commitment: 'confirmed' }).send()),
    rpcCall(() =>
      rpc
        .getSignaturesForAddress(wallet, { limit: RECENT_TRANSACTIONS, commitment: 'confirmed' })
        .send()
    ),
  ])
  const transactions = await Promise.all(
    signatures.map(async (entry) => {
      const tx = await rpcCall(() =>
        rpc
          .getTransaction(toSignature(entry.signature), {
            encoding: 'jsonParsed',
            maxSupportedTransactionVersion: 0,
            commitment: 'confirmed',
          })
          .send()
      )
      return classify(
        wallet,
        entry.signature,
        tx,
        entry.blockTime === null ? null : Number(entry.blockTime)
      )
    })
  )
  return { lamports: balance.value.toString(), transactions }
}

/**
 * The chain view of a wallet, shared by every instance for
 * WALLET_CACHE_SECONDS; concurrent page loads share one fetch.
 */
function cachedView(wallet: Address): Promise<ChainView> {
  return cached(`${CACHE_PREFIX}${wallet}`, WALLET_CACHE_SECONDS, () => chainView(wallet))
}

/** The SOL price of the billing feed (60 s cache), with a refusal that speaks of wallets. */
async function solPrice(): Promise<number> {
  try {
    return await usdPrice('sol')
  } catch (error) {
    throw new ServiceUnavailableException(
      'The SOL price is unavailable right now (PRICE_API_URL), so wallet balances cannot be valued; try again shortly',
      { cause: error }
    )
  }
}

/** GET /agents/:id/wallet-watch. */
export async function watchedWallets(agent: Agent): Promise<{ watchedWallets: WatchedWallet[] }> {
  const wallets = await walletsOf(agent.id)
  if (wallets.length === 0) return { watchedWallets: [] }
  requireToolSetting('SOLANA_RPC_URL', PURPOSE)
  requireToolSetting('PRICE_API_URL', PURPOSE)
  const [solUsd, views] = await Promise.all([
    solPrice(),
    Promise.all(wallets.map((wallet) => cachedView(toAddress(wallet)))),
  ])
  return {
    watchedWallets: wallets.map((wallet, index) => {
      const sol = Number(views[index].lamports) / LAMPORTS_PER_SOL
      return {
        address: wallet,
        balance: { sol, usd: Math.round(sol * solUsd * 100) / 100 },
        transactions: views[index].transactions,
      }
    }),
  }
}

/** POST /agents/:id/wallet-watch: replaces the set (validated by the caller). */
export async function setWatchedWallets(
  agent: Agent,
  wallets: string[]
): Promise<{ wallets: string[] }> {
  const unique = [...new Set(wallets)]
  await db.transaction(async (trx) => {
    await trx.from('watched_wallets').where('agent_id', agent.id).delete()
    const now = new Date()
    await trx
      .insertQuery()
      .table('watched_wallets')
      .multiInsert(
        unique.map((address, position) => ({
          agent_id: agent.id,
          address,
          position,
          created_at: now,
        }))
      )
  })
  return { wallets: unique }
}
