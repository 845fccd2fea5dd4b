import type { HttpContext } from '@adonisjs/core/http'
import { issueWalletChallenge, linkWallet } from '#billing/services/wallet_link_service'
import { walletLinkValidator } from '#billing/validators/billing_validators'

export default class WalletController {
  /**
   * @nonce
   * @summary Start linking a wallet
   * @description Returns a single-use challenge valid 10 minutes; sign `message` (UTF-8 bytes) with the wallet's signMessage and send the signature to POST /auth/wallet. A new challenge replaces the previous one.
   * @responseBody 200 - {"success":true,"data":{"nonce":"q8Zk...","message":"Agent Host wants you to link this wallet to your account.\n\nService: https://example.com\nAccount: alice (3f6c...)\nNonce: q8Zk...\nIssued at: 2025-01-01T00:00:00.000Z\nExpires at: 2025-01-01T00:10:00.000Z","expiresAt":"2025-01-01T00:10:00.000Z"}}
   */
  async nonce({ auth }: HttpContext) {
    return issueWalletChallenge(auth.getUserOrFail())
  }

  /**
   * @link
   * @summary Link a wallet
   * @description `signature` is the wallet's ed25519 signature of the pending challenge message (base58 or base64). The wallet then pays for plans without a quote memo. 409 when the wallet is linked to another account.
   * @requestBody {"address":"7xKX...","signature":"3yZe..."}
   * @responseBody 200 - {"success":true,"data":{"walletAddress":"7xKX..."}}
   */
  async link({ auth, request }: HttpContext) {
    const input = await request.validateUsing(walletLinkValidator)
    return linkWallet(auth.getUserOrFail(), input)
  }
}
