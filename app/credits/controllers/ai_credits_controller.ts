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
  async balance({ auth }: HttpContext) {
    return balanceView(auth.getUserOrFail())
  }

  async history({ auth, request }: HttpContext) {
    const { limit } = await request.validateUsing(historyValidator)
    return historyView(auth.getUserOrFail(), limit ?? 20)
  }

  async grant({ auth, bouncer, request }: HttpContext) {
    const admin = auth.getUserOrFail()
    // Refuse non-admins before looking at the body.
    await bouncer.with(AccountPolicy).authorize('grantCredits')
    const input = await request.validateUsing(grantValidator)
    return grantCredits(admin, input)
  }

  async budget({ auth }: HttpContext) {
    return accountBudgetView(auth.getUserOrFail().id)
  }

  async setBudget({ auth, request }: HttpContext) {
    const { monthlyCredits } = await request.validateUsing(accountBudgetValidator)
    return setAccountBudget(auth.getUserOrFail().id, monthlyCredits)
  }
}
