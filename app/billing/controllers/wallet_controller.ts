import type { HttpContext } from '@adonisjs/core/http'
import { issueWalletChallenge, linkWallet } from '#billing/services/wallet_link_service'
import { walletLinkValidator } from '#billing/validators/billing_validators'

export default class WalletController {
  async nonce({ auth }: HttpContext) {
    return issueWalletChallenge(auth.getUserOrFail())
  }

  async link({ auth, request }: HttpContext) {
    const input = await request.validateUsing(walletLinkValidator)
    return linkWallet(auth.getUserOrFail(), input)
  }
}
