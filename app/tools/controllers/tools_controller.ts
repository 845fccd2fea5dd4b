import type { HttpContext } from '@adonisjs/core/http'
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
  async scanToken({ auth, params, request }: HttpContext) {
    const { mintAddress } = await request.validateUsing(scanTokenValidator)
    return scanToken(auth.getUserOrFail(), params.id, mintAddress)
  }

  async research({ auth, params, request }: HttpContext) {
    const { query } = await request.validateUsing(researchValidator)
    return research(auth.getUserOrFail(), params.id, query)
  }

  async walletWatch({ auth, params }: HttpContext) {
    return watchedWallets(auth.getUserOrFail(), params.id)
  }

  async setWalletWatch({ auth, params, request }: HttpContext) {
    const { wallets } = await request.validateUsing(walletWatchValidator)
    return setWatchedWallets(auth.getUserOrFail(), params.id, wallets)
  }
}
