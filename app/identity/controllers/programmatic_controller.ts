import type { HttpContext } from '@adonisjs/core/http'
import type User from '#identity/models/user'
import { requestIdentity } from '#identity/guards/bearer_guard'
import quotaService from '#identity/services/quota_service'

export default class ProgrammaticController {
  /**
   * @me
   * @summary My profile
   * @description API key. `platformCredits` is a legacy field, always 0.
   * @responseBody 200 - {"success":true,"data":{"id":"3f6c...","walletAddress":null,"referralCode":"K7QX2M9PAB","platformCredits":0,"aiCreditsBalance":500,"createdAt":"2025-01-01T00:00:00.000Z"}}
   */
  async me(ctx: HttpContext) {
    // From the users row: no model is built for this hot read.
    const { row } = requestIdentity(ctx)
    return {
      id: row.id,
      walletAddress: row.wallet_address,
      referralCode: row.referral_code,
      platformCredits: 0,
      aiCreditsBalance: row.ai_credits_balance,
      createdAt: new Date(row.created_at as Date | string).toISOString(),
    }
  }

  /**
   * @usage
   * @summary Requests used today
   * @description API key. Counts this request too; resets at 00:00 UTC.
   * @responseBody 200 - {"success":true,"data":{"today":12,"limit":100,"remaining":88,"resetAt":"2025-01-02T00:00:00.000Z"}}
   */
  async usage(ctx: HttpContext) {
    const quota = ctx.quota ?? (await quotaService.peek(ctx.auth.getUserOrFail() as User))
    return {
      today: quota.used,
      limit: quota.limit,
      remaining: quota.remaining,
      resetAt: quota.resetAt.toISOString(),
    }
  }
}
