import type { HttpContext } from '@adonisjs/core/http'
import { claim, myCode, stats, validate } from '#referrals/services/referral_service'

export default class ReferralsController {
  /**
   * @myCode
   * @summary My referral code
   * @description `shareLink` opens registration with the code filled in.
   * @responseBody 200 - {"success":true,"data":{"referralCode":"K7QX2M9PAB","shareLink":"https://example.com/register?ref=K7QX2M9PAB","username":"alice"}}
   */
  async myCode({ auth }: HttpContext) {
    return myCode(auth.getUserOrFail())
  }

  /**
   * @stats
   * @summary My referrals
   * @description `totalEarned` is the AI Credits the caller received for referrals; `referrals` lists the newest 500 accounts referred.
   * @responseBody 200 - {"success":true,"data":{"totalReferred":2,"totalEarned":500,"rewardPerReferral":500,"rewardUnit":"ai_credits","referrals":[{"username":"bob","date":"2025-01-01T00:00:00.000Z","rewardClaimed":true}]}}
   */
  async stats({ auth }: HttpContext) {
    return stats(auth.getUserOrFail())
  }

  /**
   * @claim
   * @summary Claim referral rewards
   * @description Pays every eligible referral not paid yet (the invited account verified its e-mail and created an agent): 500 AI Credits to the caller and 500 to the invited account, each once. `totalCredited` went to the caller, `referredCredited` to the invited accounts.
   * @responseBody 200 - {"success":true,"data":{"claimed":1,"totalCredited":500,"referredCredited":500,"totalAiCreditsGranted":1000,"unit":"ai_credits","message":"Claimed 1 referral reward: 500 AI Credits for you and 500 for each invited account"}}
   */
  async claim({ auth }: HttpContext) {
    return claim(auth.getUserOrFail())
  }

  /**
   * @validate
   * @summary Check a referral code
   * @description Public. `referrerUsername` is null when the code is not valid.
   * @nullable referrerUsername
   * @responseBody 200 - {"success":true,"data":{"valid":true,"referrerUsername":"alice"}}
   */
  async validate({ params }: HttpContext) {
    return validate(String(params.code ?? ''))
  }
}
