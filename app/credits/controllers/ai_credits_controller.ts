import type { HttpContext } from '@adonisjs/core/http'
import { grantValidator, historyValidator } from '#credits/validators/credits_validators'
import {
  GRANT_FORBIDDEN,
  balanceView,
  grantCredits,
  historyView,
} from '#credits/services/credits_service'
import { requireRole } from '#identity/services/roles'

export default class AiCreditsController {
  async balance({ auth }: HttpContext) {
    return balanceView(auth.getUserOrFail())
  }

  async history({ auth, request }: HttpContext) {
    const { limit } = await request.validateUsing(historyValidator)
    return historyView(auth.getUserOrFail(), limit ?? 20)
  }

  async grant({ auth, request }: HttpContext) {
    const admin = auth.getUserOrFail()
    // Refuse non-admins before looking at the body.
    requireRole(admin, ['admin'], GRANT_FORBIDDEN)
    const input = await request.validateUsing(grantValidator)
    return grantCredits(admin, input)
  }
}
