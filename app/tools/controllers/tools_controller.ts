import type { HttpContext } from '@adonisjs/core/http'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import { research } from '#tools/services/research_service'
import { scanToken } from '#tools/services/token_scan_service'
import { setWatchedWallets, watchedWallets } from '#tools/services/wallet_watch_service'
import {
  researchValidator,
  scanTokenValidator,
  walletWatchValidator,
} from '#tools/validators/tool_validators'

/** The Solana and research tools of an agent (docs/tools.md). */
export default class ToolsController {
  /**
   * @scanToken
   * @summary Scan a token
   * @description Reads the mint over Solana JSON-RPC (decimals, supply, authorities), its name and symbol from Metaplex metadata or the Token-2022 metadata extension, the USD price from TOKEN_PRICE_API_URL, and an AI risk analysis from the hosted model (metered in AI Credits). 400 for a mint that is not base58 of 32 bytes, 404 when no mint exists there, 429 after 10 scans a day per account, 503 when SOLANA_RPC_URL or TOKEN_PRICE_API_URL is unset. A mint scanned in the last minute is answered from cache (still one scan).
   * @requestBody {"mintAddress":"EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"}
   * @responseBody 200 - {"success":true,"data":{"mintAddress":"EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v","name":"USD Coin","symbol":"USDC","decimals":6,"price":0.9999,"marketCap":9000000000,"aiSummary":"USDC is a fiat-backed stablecoin... Verdict: low risk.","scannedAt":"2025-01-01T00:00:00.000Z","supply":"9000000000","priceAvailable":true,"mintAuthority":"BJE5MMbqXjVwjAF7oxwPYXnTXDyspzZyt4vwenNw5ruG","freezeAuthority":"7dGbd2QZcCKcTndnHcTL8q7SMVXAkp688NTQYwrRCrar","tokenProgram":"spl-token","model":"gpt-4o-mini"}}
   */
  async scanToken({ bouncer, params, request }: HttpContext) {
    const { mintAddress } = await request.validateUsing(scanTokenValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('useTools', agent)
    return scanToken(agent, mintAddress)
  }

  /**
   * @research
   * @summary Research a question
   * @description One answer from the hosted model (metered in AI Credits), stored; `model` names the model that answered. 20 a day per account (429 after).
   * @requestBody {"query":"What is the difference between SPL Token and Token-2022?"}
   * @responseBody 200 - {"success":true,"data":{"query":"What is the difference between SPL Token and Token-2022?","result":"Token-2022 is a superset...","model":"gpt-4o-mini","completedAt":"2025-01-01T00:00:00.000Z"}}
   */
  async research({ bouncer, params, request }: HttpContext) {
    const { query } = await request.validateUsing(researchValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('useTools', agent)
    return research(agent, query)
  }

  /**
   * @walletWatch
   * @summary Watched wallets
   * @description Each watched wallet with its balance (getBalance; USD at the SOL price of PRICE_API_URL) and its 10 most recent transactions (getSignaturesForAddress and getTransaction): `type` in, out or other, `amount` in SOL without the fee, `ts` in Unix seconds. A wallet's chain data is cached 30 s.
   * @responseBody 200 - {"success":true,"data":{"watchedWallets":[{"address":"9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM","balance":{"sol":1.5,"usd":213.15},"transactions":[{"signature":"5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW","type":"in","amount":1.5,"ts":1735689600}]}]}}
   */
  async walletWatch({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return watchedWallets(agent)
  }

  /**
   * @setWalletWatch
   * @summary Set watched wallets
   * @description Replaces the agent's watched wallets with 1 to 3 Solana addresses (duplicates counted once). 400 for anything else.
   * @requestBody {"wallets":["9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM"]}
   * @responseBody 200 - {"success":true,"data":{"wallets":["9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM"]}}
   */
  async setWalletWatch({ bouncer, params, request }: HttpContext) {
    const { wallets } = await request.validateUsing(walletWatchValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return setWatchedWallets(agent, wallets)
  }
}
