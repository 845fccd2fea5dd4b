import type { HttpContext } from '@adonisjs/core/http'
import { grantValidator, historyValidator } from '#credits/validators/credits_validators'
import { balanceView, grantCredits, historyView } from '#credits/services/credits_service'
import AccountPolicy from '#identity/policies/account_policy'

export default class AiCreditsController {
  /**
   * @balance
   * @summary AI Credit balance
   * @description `monthlyGrant` is the tier's monthly grant; `tier` the tier in effect now.
   * @responseBody 200 - {"success":true,"data":{"balance":500,"monthlyGrant":500,"tier":"free"}}
   */
  async balance({ auth }: HttpContext) {
    return balanceView(auth.getUserOrFail())
  }

  /**
   * @history
   * @summary AI Credit history
   * @description Usage: every debit (model calls and other spending), newest first; `credits` is the positive number of credits each cost. Free calls (local-dev) are not debits and are not listed.
   * @paramQuery limit - Entries to return, 1 to 100 (default 20) - @type(number)
   * @responseBody 200 - {"success":true,"data":{"usage":[{"id":"1d0f...","kind":"llm","provider":"openai","model":"gpt-4o-mini","credits":12,"inputTokens":820,"outputTokens":140,"reason":null,"createdAt":"2025-01-01T00:00:00.000Z"}]}}
   */
  async history({ auth, request }: HttpContext) {
    const { limit } = await request.validateUsing(historyValidator)
    return historyView(auth.getUserOrFail(), limit ?? 20)
  }

  /**
   * @grant
   * @summary Grant AI Credits (administrators)
   * @description 403 for anyone but an admin. Recorded in the ledger with the admin and the reason.
   * @requestBody {"userId":"3f6c...","credits":1000,"reason":"Goodwill for the outage on 2025-01-01"}
   * @responseBody 200 - {"success":true,"data":{"id":"8e2a...","userId":"3f6c...","credits":1000,"reason":"Goodwill for the outage on 2025-01-01","grantedBy":"a1b2...","balance":1500,"createdAt":"2025-01-01T00:00:00.000Z"}}
   */
  async grant({ auth, bouncer, request }: HttpContext) {
    const admin = auth.getUserOrFail()
    // Refuse non-admins before looking at the body.
    await bouncer.with(AccountPolicy).authorize('grantCredits')
    const input = await request.validateUsing(grantValidator)
    return grantCredits(admin, input)
  }
}
