import type { HttpContext } from '@adonisjs/core/http'
import { claim, myCode, stats, validate } from '#referrals/services/referral_service'

export default class ReferralsController {
  async myCode({ auth }: HttpContext) {
    return myCode(auth.getUserOrFail())
  }

  async stats({ auth }: HttpContext) {
    return stats(auth.getUserOrFail())
  }

  async claim({ auth }: HttpContext) {
    return claim(auth.getUserOrFail())
  }

  async validate({ params }: HttpContext) {
    return validate(String(params.code ?? ''))
  }
}
