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
  async scanToken({ bouncer, params, request }: HttpContext) {
    const { mintAddress } = await request.validateUsing(scanTokenValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('useTools', agent)
    return scanToken(agent, mintAddress)
  }

  async research({ bouncer, params, request }: HttpContext) {
    const { query } = await request.validateUsing(researchValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('useTools', agent)
    return research(agent, query)
  }

  async walletWatch({ bouncer, params }: HttpContext) {
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('view', agent)
    return watchedWallets(agent)
  }

  async setWalletWatch({ bouncer, params, request }: HttpContext) {
    const { wallets } = await request.validateUsing(walletWatchValidator)
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('update', agent)
    return setWatchedWallets(agent, wallets)
  }
}
