import { DateTime } from 'luxon'
import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import Payment from '#billing/models/payment'
import Quote from '#billing/models/quote'
import { PaymentRejectedException } from '#billing/services/payment_rejected'
import type { VerifiedPayment } from '#billing/services/payment_verifier'

function isUniqueViolation(error: unknown, constraint: string): boolean {
  const pgError = error as { code?: string; constraint?: string } | null
  return pgError?.code === '23505' && pgError.constraint === constraint
}

/**
 * Stores a verified payment inside the caller's database transaction, which
 * must also hold the activation it pays for: call it first there, so a second
 * submission of the same signature waits on the unique index and is refused
 * ("this transaction was already used") once the first commits. A quote is
 * consumed in the same step. On refusal the caller's transaction is unusable
 * and must roll back (the exception propagating out of `db.transaction` does it).
 */
export async function recordVerifiedPayment(
  trx: TransactionClientContract,
  verified: VerifiedPayment
): Promise<Payment> {
  let payment: Payment
  try {
    payment = await Payment.create(
      {
        userId: verified.userId,
        quoteId: verified.quoteId,
        purchaseKind: verified.purchase.kind,
        purchaseKey: verified.purchase.key,
        billingPeriod: verified.purchase.billingPeriod,
        token: verified.token,
        mint: verified.mint,
        decimals: verified.decimals,
        amountBaseUnits: verified.amountBaseUnits,
        usdValue: verified.usdValue,
        signature: verified.signature,
        payer: verified.payer,
        status: 'completed',
        blockTime: DateTime.fromJSDate(verified.blockTime),
      },
      { client: trx }
    )
  } catch (error) {
    if (isUniqueViolation(error, 'payments_signature_unique')) {
      throw new PaymentRejectedException(
        'replay',
        'This transaction was already used for a payment'
      )
    }
    throw error
  }

  if (verified.quoteId) {
    const consumed = await Quote.query({ client: trx })
      .where('id', verified.quoteId)
      .whereNull('used_at')
      .update({ used_at: DateTime.utc().toSQL() }, ['id'])
    if (consumed.length !== 1) {
      throw new PaymentRejectedException(
        'quote',
        "The quote in this transaction's memo was already used for a payment"
      )
    }
  }
  return payment
}
