import type { HttpContext } from '@adonisjs/core/http'
import { accountFeatures, catalogue } from '#billing/services/features_service'
import { purchaseAddon, quotePurchase, subscribe } from '#billing/services/purchase_service'
import {
  addonValidator,
  quoteValidator,
  subscribeValidator,
} from '#billing/validators/billing_validators'

export default class FeaturesController {
  /**
   * @index
   * @summary Plans and add-ons
   * @description Public. The tier catalogue (keyed by tier key, in `tierOrder`), the add-ons and the Founding Member slots left. `dailyRequestLimit` is the tier's daily /api/v1 request limit.
   * @responseBody 200 - {"success":true,"data":{"tiers":{"free":{"key":"free","name":"Free","usdPrice":0,"includedAgents":1,"aiCreditsMonthly":500,"dailyRequestLimit":100,"maxSkills":2,"maxSchedules":2,"minScheduleIntervalMinutes":5,"dailyTokenScanLimit":10,"dailyResearchLimit":20},"pro":{"key":"pro","name":"Pro","usdPrice":19.99,"includedAgents":3,"aiCreditsMonthly":15000,"dailyRequestLimit":100000,"maxSkills":10,"maxSchedules":20,"minScheduleIntervalMinutes":1,"dailyTokenScanLimit":10,"dailyResearchLimit":20}},"tierOrder":["free","starter","pro","business","founding_member"],"addons":[{"key":"addon.agents.3","name":"3 extra agents","usdPrice":6.99,"type":"subscription"},{"key":"addon.ai_credits.25000","name":"25,000 AI Credits","usdPrice":30,"type":"one_time"}],"founding":{"maxSlots":20,"taken":3,"remaining":17}}}
   */
  async index() {
    return catalogue()
  }

  /**
   * @account
   * @summary My plan and limits
   * @description `tier` is the tier in effect; `agentLimit` = the tier's included agents plus active add-on agents; `chatLimit` is the daily request limit, `searchLimit` the daily research allowance. `platformCredits` is legacy, always 0.
   * @responseBody 200 - {"success":true,"data":{"tier":"pro","tierConfig":{"key":"pro","name":"Pro","includedAgents":3},"activeAddons":[{"key":"addon.agents.3","name":"3 extra agents","extraAgents":3,"expiresAt":"2025-02-01T00:00:00.000Z"}],"agentLimit":6,"agentCount":2,"platformCredits":0,"aiCredits":{"balance":15000,"monthlyGrant":15000,"tier":"pro"},"subscriptionExpiresAt":"2025-02-01T00:00:00.000Z","chatLimit":100000,"searchLimit":20}}
   */
  async account({ auth }: HttpContext) {
    return accountFeatures(auth.getUserOrFail())
  }

  /**
   * @quote
   * @summary Quote an exact payment amount
   * @description Give `tier` or `addonKey`. Pay exactly `amount` of `token` to `recipient` (the treasury) with `memo` in a memo instruction, within 15 minutes, from any wallet; then submit the signature to /features/subscribe or /features/addon. 503 when no price is available.
   * @requestBody {"tier":"pro","paymentToken":"sol","billingPeriod":"monthly"}
   * @responseBody 200 - {"success":true,"data":{"quoteId":"5b1e...","token":"sol","amount":"0.140408794","amountBaseUnits":"140408794","decimals":9,"mint":null,"recipient":"Treasury1111...","memo":"agent-host:Qm9v...","usdValue":19.99,"tokenUsdPrice":142.37,"purchase":{"kind":"tier","key":"pro","billingPeriod":"monthly"},"expiresAt":"2025-01-01T00:15:00.000Z"}}
   */
  async quote({ auth, request }: HttpContext) {
    const input = await request.validateUsing(quoteValidator)
    return quotePurchase(auth.getUserOrFail(), input)
  }

  /**
   * @subscribe
   * @summary Buy or renew a tier
   * @description Verifies the on-chain payment (finalized, succeeded, paid the treasury at least the price, signed by the linked wallet or carrying this account's quote memo, at most 30 minutes old, never used before) and activates the tier. Renewing the tier in effect extends it from its expiry; annual = 12 months; founding_member is lifetime (20 slots). A refused payment is 400 VALIDATION_ERROR naming the failed check and changes nothing. `solAmount` is ignored.
   * @requestBody {"tier":"pro","txSignature":"5VfY...","paymentToken":"sol","billingPeriod":"monthly"}
   * @responseBody 200 - {"success":true,"data":{"tier":"pro","billingPeriod":"monthly","subscriptionExpiresAt":"2025-02-01T00:00:00.000Z","foundingSlot":null,"agentLimit":3,"aiCreditsBalance":15000,"payment":{"id":"9c1d...","signature":"5VfY...","token":"sol","amount":"0.133267","amountBaseUnits":"133267000","decimals":9,"mint":null,"usdValue":19.99,"purchase":{"kind":"tier","key":"pro","billingPeriod":"monthly"},"payer":"Wallet1111...","status":"completed","blockTime":"2025-01-01T00:00:00.000Z","createdAt":"2025-01-01T00:00:05.000Z"}}}
   */
  async subscribe({ auth, request }: HttpContext) {
    // `solAmount` is a client hint only: the service recomputes the amount due.
    const { tier, txSignature, paymentToken, billingPeriod } =
      await request.validateUsing(subscribeValidator)
    return subscribe(auth.getUserOrFail(), { tier, txSignature, paymentToken, billingPeriod })
  }

  /**
   * @addon
   * @summary Buy an add-on
   * @description `addon.agents.3`: 3 more agents for a month (annual: 12 months); packs add up. `addon.ai_credits.25000`: 25,000 AI Credits once. Payment checks as for /features/subscribe.
   * @requestBody {"addonKey":"addon.agents.3","txSignature":"5VfY...","paymentToken":"usdc","billingPeriod":"monthly"}
   * @responseBody 200 - {"success":true,"data":{"addon":{"key":"addon.agents.3","name":"3 extra agents","type":"subscription","extraAgents":3,"aiCredits":0,"expiresAt":"2025-02-01T00:00:00.000Z"},"activeAddons":[{"key":"addon.agents.3","name":"3 extra agents","extraAgents":3,"expiresAt":"2025-02-01T00:00:00.000Z"}],"agentLimit":4,"aiCreditsBalance":500,"payment":{"id":"9c1d...","signature":"5VfY...","token":"usdc","amount":"6.99","amountBaseUnits":"6990000","decimals":6,"mint":"EPjF...","usdValue":6.99,"purchase":{"kind":"addon","key":"addon.agents.3","billingPeriod":"monthly"},"payer":"Wallet1111...","status":"completed","blockTime":"2025-01-01T00:00:00.000Z","createdAt":"2025-01-01T00:00:05.000Z"}}}
   */
  async addon({ auth, request }: HttpContext) {
    const input = await request.validateUsing(addonValidator)
    return purchaseAddon(auth.getUserOrFail(), input)
  }
}
