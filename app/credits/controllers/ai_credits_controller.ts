import type { HttpContext } from '@adonisjs/core/http'
import {
  accountBudgetValidator,
  grantValidator,
  historyValidator,
} from '#credits/validators/credits_validators'
import { accountBudgetView, setAccountBudget } from '#credits/services/credit_budgets'
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

  /**
   * @budget
   * @summary Monthly AI Credit budget of the account
   * @description `monthlyCredits` is null without a budget. `spentCredits`: the account's debits in the current UTC month (`period`); the budget resets at `resetsAt`. Agents have their own budget in `config.budget.monthlyCredits`.
   * @responseBody 200 - {"success":true,"data":{"monthlyCredits":5000,"spentCredits":1200,"period":"2025-01","resetsAt":"2025-02-01T00:00:00.000Z"}}
   */
  async budget({ auth }: HttpContext) {
    return accountBudgetView(auth.getUserOrFail().id)
  }

  /**
   * @setBudget
   * @summary Set the account's monthly AI Credit budget
   * @description A positive integer, or null to remove it. Hosted and proxied model calls of the account are refused with 402 INSUFFICIENT_CREDITS once the month's spending would pass it; at 80 % and 100 % the owner is notified once a month.
   * @requestBody {"monthlyCredits":5000}
   * @responseBody 200 - {"success":true,"data":{"monthlyCredits":5000,"spentCredits":1200,"period":"2025-01","resetsAt":"2025-02-01T00:00:00.000Z"}}
   */
  async setBudget({ auth, request }: HttpContext) {
    const { monthlyCredits } = await request.validateUsing(accountBudgetValidator)
    return setAccountBudget(auth.getUserOrFail().id, monthlyCredits)
  }
}
