import type { HttpContext } from '@adonisjs/core/http'
import { accountFeatures, catalogue } from '#billing/services/features_service'
import { purchaseAddon, quotePurchase, subscribe } from '#billing/services/purchase_service'
import {
  addonValidator,
  quoteValidator,
  subscribeValidator,
} from '#billing/validators/billing_validators'

export default class FeaturesController {
  async index() {
    return catalogue()
  }

  async account({ auth }: HttpContext) {
    return accountFeatures(auth.getUserOrFail())
  }

  async quote({ auth, request }: HttpContext) {
    const input = await request.validateUsing(quoteValidator)
    return quotePurchase(auth.getUserOrFail(), input)
  }

  async subscribe({ auth, request }: HttpContext) {
    // `solAmount` is a client hint only: the service recomputes the amount due.
    const { tier, txSignature, paymentToken, billingPeriod } =
      await request.validateUsing(subscribeValidator)
    return subscribe(auth.getUserOrFail(), { tier, txSignature, paymentToken, billingPeriod })
  }

  async addon({ auth, request }: HttpContext) {
    const input = await request.validateUsing(addonValidator)
    return purchaseAddon(auth.getUserOrFail(), input)
  }
}
