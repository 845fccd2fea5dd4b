import { isAddress, type Address } from '@solana/kit'
import { getMintDecoder } from '@solana-program/token'
import db from '@adonisjs/lucid/services/db'
import { tierPlan } from '#config/plans'
import { NotFoundException, ValidationException } from '#core/exceptions/api_exceptions'
import { cacheClear, cacheGet, cacheSet } from '#core/cache/shared_cache'
import { hostedCompletion } from '#chat/services/model_proxy'
import User from '#identity/models/user'
import type Agent from '#agents/models/agent'
import { withDailyUse } from '#tools/services/daily_allowance'
import {
  rpcRequest as rpcCall,
  TOKEN_2022_PROGRAM_ADDRESS,
  TOKEN_PROGRAMS,
} from '#billing/services/solana_rpc'
import { toolsRpc } from '#tools/services/solana_client'
import {
  decodeMetaplexMetadata,
  decodeToken2022Metadata,
  metaplexMetadataAddress,
  type TokenNames,
} from '#tools/services/token_metadata'
import { tokenUsdPrice } from '#tools/services/token_price'
import { requireToolSetting } from '#tools/services/tool_settings'

/** Spec "Token scan result" (plus the raw facts the summary was made from). */
export interface TokenScanResult {
  mintAddress: string
  name: string
  symbol: string
  decimals: number
  price: number
  marketCap: number
  aiSummary: string
  scannedAt: string
  /** Whole tokens in circulation (decimal string: u64 supplies overflow doubles). */
  supply: string
  /** False when the price API does not list the mint (price and marketCap are then 0). */
  priceAvailable: boolean
  mintAuthority: string | null
  freezeAuthority: string | null
  tokenProgram: 'spl-token' | 'spl-token-2022'
  model: string
}

/**
 * A scan of one mint is reused for this long by every instance (a fresh
 * one costs RPC, price and model calls).
 */
export const SCAN_CACHE_SECONDS = 60
const CACHE_PREFIX = 'tools:scan:'

/** Forgets cached scans (tests). */
export function clearScanCache(): Promise<void> {
  return cacheClear(CACHE_PREFIX)
}

const PURPOSE = 'Token scanning'

interface MintFacts {
  decimals: number
  supply: bigint
  mintAuthority: string | null
  freezeAuthority: string | null
  program: Address
  names: TokenNames | null
}

function wholeTokens(amount: bigint, decimals: number): string {
  if (decimals === 0) return amount.toString()
  const text = amount.toString().padStart(decimals + 1, '0')
  const whole = text.slice(0, -decimals)
  const fraction = text.slice(-decimals).replace(/0+$/, '')
  return fraction ? `${whole}.${fraction}` : whole
}

/** Mint account, then its metadata: 404 when the address holds no token mint. */
async function readMint(mint: Address): Promise<MintFacts> {
  const rpc = toolsRpc(PURPOSE)
  const { value } = await rpcCall(() =>
    rpc.getAccountInfo(mint, { commitment: 'confirmed', encoding: 'base64' }).send()
  )
  const data = value ? Buffer.from(value.data[0], 'base64') : undefined
  // A mint is 82 bytes (classic) or an extended Token-2022 account whose type byte says mint.
  const isMint =
    value &&
    data &&
    TOKEN_PROGRAMS.includes(value.owner) &&
    (data.length === 82 || (value.owner === TOKEN_2022_PROGRAM_ADDRESS && data[165] === 1))
  if (!value || !data || !isMint) {
    throw new NotFoundException(`No token mint exists at ${mint}`)
  }
  const decoded = getMintDecoder().decode(data.subarray(0, 82))
  let names = value.owner === TOKEN_2022_PROGRAM_ADDRESS ? decodeToken2022Metadata(data) : null
  if (!names) {
    const metadataAddress = await metaplexMetadataAddress(mint)
    const metadata = await rpcCall(() =>
      rpc.getAccountInfo(metadataAddress, { commitment: 'confirmed', encoding: 'base64' }).send()
    )
    if (metadata.value) {
      names = decodeMetaplexMetadata(Buffer.from(metadata.value.data[0], 'base64'))
    }
  }
  return {
    decimals: decoded.decimals,
    supply: decoded.supply,
    mintAuthority: decoded.mintAuthority.__option === 'Some' ? decoded.mintAuthority.value : null,
    freezeAuthority:
      decoded.freezeAuthority.__option === 'Some' ? decoded.freezeAuthority.value : null,
    program: value.owner,
    names,
  }
}

function summaryPrompt(mint: string, facts: MintFacts, price: number | null, cap: number | null) {
  const lines = [
    `Mint address: ${mint}`,
    `Token program: ${facts.program === TOKEN_2022_PROGRAM_ADDRESS ? 'SPL Token-2022' : 'SPL Token'}`,
    `Name: ${facts.names?.name || 'unknown (no metadata)'}`,
    `Symbol: ${facts.names?.symbol || 'unknown'}`,
    `Decimals: ${facts.decimals}`,
    `Total supply: ${wholeTokens(facts.supply, facts.decimals)} tokens`,
    `Mint authority: ${facts.mintAuthority ?? 'none (supply is fixed)'}`,
    `Freeze authority: ${facts.freezeAuthority ?? 'none'}`,
    `USD price: ${price === null ? 'not listed by the price API' : price}`,
    `Market cap (USD): ${cap === null ? 'unknown' : cap}`,
  ]
  return [
    {
      role: 'system' as const,
      content:
        'You are a careful Solana token analyst. Using ONLY the facts given, write a short risk ' +
        'analysis (at most 120 words): what the token is, the main risks (mint or freeze ' +
        'authority still set, no price or liquidity, missing metadata), and a one-line verdict ' +
        '(low, medium or high risk). Do not invent facts. Not financial advice.',
    },
    { role: 'user' as const, content: `Token facts:\n${lines.join('\n')}` },
  ]
}

/** Checks the mint text: base58 of 32 bytes (an address), else 400. */
export function parseMint(value: unknown): Address {
  if (typeof value !== 'string' || !isAddress(value.trim())) {
    throw new ValidationException('mintAddress must be a Solana address: base58 text of 32 bytes')
  }
  return value.trim() as Address
}

/**
 * POST /agents/:id/scan-token: mint facts over Solana JSON-RPC, name and
 * symbol from metadata, price from TOKEN_PRICE_API_URL, and a risk summary
 * from the hosted model (the owner's AI Credits). Each scan is one of the
 * account's daily scans, also when answered from the per-mint cache.
 */
export async function scanToken(agent: Agent, mintInput: unknown): Promise<TokenScanResult> {
  const mint = parseMint(mintInput)
  // Settings first: a scan that cannot run costs no daily use.
  requireToolSetting('SOLANA_RPC_URL', PURPOSE)
  requireToolSetting('TOKEN_PRICE_API_URL', PURPOSE)
  const owner = await User.findOrFail(agent.userId)
  const allowance = {
    table: 'token_scans' as const,
    userId: owner.id,
    limit: tierPlan(owner.effectiveTier).dailyTokenScanLimit,
    row: { agent_id: agent.id, mint_address: mint },
    what: 'token scans',
  }
  return withDailyUse(allowance, async (useId) => {
    const result =
      (await cacheGet<TokenScanResult>(`${CACHE_PREFIX}${mint}`)) ??
      (await freshScan(owner.id, agent.id, mint))
    await db
      .from('token_scans')
      .where('id', useId)
      .update({ result: JSON.stringify(result) })
    return result
  })
}

async function freshScan(payerId: string, agentId: string, mint: Address) {
  const [facts, price] = await Promise.all([readMint(mint), tokenUsdPrice(mint)])
  const supplyWhole = Number(facts.supply) / 10 ** facts.decimals
  const marketCap = price === null ? null : Math.round(price * supplyWhole * 100) / 100
  const { reply, settled } = await hostedCompletion(
    { messages: summaryPrompt(mint, facts, price, marketCap), max_tokens: 400 },
    { payerId, agentId, source: 'token_scan' }
  )
  await settled
  const result: TokenScanResult = {
    mintAddress: mint,
    name: facts.names?.name ?? '',
    symbol: facts.names?.symbol ?? '',
    decimals: facts.decimals,
    price: price ?? 0,
    marketCap: marketCap ?? 0,
    aiSummary: reply.content,
    scannedAt: new Date().toISOString(),
    supply: wholeTokens(facts.supply, facts.decimals),
    priceAvailable: price !== null,
    mintAuthority: facts.mintAuthority,
    freezeAuthority: facts.freezeAuthority,
    tokenProgram: facts.program === TOKEN_2022_PROGRAM_ADDRESS ? 'spl-token-2022' : 'spl-token',
    model: reply.model,
  }
  await cacheSet(`${CACHE_PREFIX}${mint}`, result, SCAN_CACHE_SECONDS)
  return result
}
