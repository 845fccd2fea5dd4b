import type { HttpContext } from '@adonisjs/core/http'
import type User from '#identity/models/user'
import { requestIdentity } from '#identity/guards/bearer_guard'
import quotaService from '#identity/services/quota_service'

export default class ProgrammaticController {
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
