import { GoneException } from '#core/exceptions/api_exceptions'

/** Routes of the old credit-based billing, kept only to say they are gone (410 GONE). */
export default class RetiredController {
  /**
   * @gone
   * @summary Retired
   * @description Always 410 GONE. Plans and add-ons are paid on chain: POST /features/subscribe and POST /features/addon; AI Credits live under /ai-credits.
   * @responseBody 410 - {"success":false,"error":"This route was retired; pay plans on chain with POST /features/subscribe","code":"GONE"}
   */
  async gone() {
    throw new GoneException(
      'This route was retired: plans and add-ons are paid on chain with POST /features/subscribe and POST /features/addon, and AI Credits are under /ai-credits'
    )
  }
}
