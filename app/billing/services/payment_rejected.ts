import { ValidationException } from '#core/exceptions/api_exceptions'

/** The verification check a payment failed (for logs and tests; the message says it to users). */
export type PaymentCheck =
  | 'signature'
  | 'not_found'
  | 'finalized'
  | 'succeeded'
  | 'recipient'
  | 'decimals'
  | 'amount'
  | 'payer'
  | 'block_time'
  | 'quote'
  | 'replay'

/**
 * A payment that failed one verification check: 400 VALIDATION_ERROR whose
 * message says which check failed. Thrown before anything changes.
 */
export class PaymentRejectedException extends ValidationException {
  constructor(
    readonly check: PaymentCheck,
    message: string
  ) {
    super(message)
  }
}
