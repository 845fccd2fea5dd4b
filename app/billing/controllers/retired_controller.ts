import { GoneException } from '#core/exceptions/api_exceptions'

/** Routes of the old credit-based billing, kept only to say they are gone (410 GONE). */
export default class RetiredController {
  async gone() {
    throw new GoneException(
      'This route was retired: plans and add-ons are paid on chain with POST /features/subscribe and POST /features/addon, and AI Credits are under /ai-credits'
    )
  }
}
