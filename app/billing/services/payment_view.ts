import type Payment from '#billing/models/payment'
import { formatBaseUnits } from '#billing/services/pricing'

/** A stored payment as answered to its owner. */
export interface PaymentView {
  id: string
  signature: string
  token: Payment['token']
  /** What reached the treasury in whole tokens ("0.0466"). */
  amount: string
  amountBaseUnits: string
  decimals: number
  mint: string | null
  usdValue: number
  purchase: { kind: Payment['purchaseKind']; key: Payment['purchaseKey']; billingPeriod: string }
  payer: string
  status: Payment['status']
  blockTime: string
  createdAt: string
}

export function presentPayment(payment: Payment): PaymentView {
  return {
    id: payment.id,
    signature: payment.signature,
    token: payment.token,
    amount: formatBaseUnits(BigInt(payment.amountBaseUnits), payment.decimals),
    amountBaseUnits: String(payment.amountBaseUnits),
    decimals: payment.decimals,
    mint: payment.mint,
    usdValue: payment.usdValue,
    purchase: {
      kind: payment.purchaseKind,
      key: payment.purchaseKey,
      billingPeriod: payment.billingPeriod,
    },
    payer: payment.payer,
    status: payment.status,
    blockTime: payment.blockTime.toUTC().toISO()!,
    createdAt: payment.createdAt.toUTC().toISO()!,
  }
}

/**
 * A payment in the personal data export. Field names avoid the endings the
 * export masks as secrets (`token`, `key`), since none of these is one.
 */
export function exportPayment(payment: Payment) {
  return {
    id: payment.id,
    purchaseKind: payment.purchaseKind,
    purchased: payment.purchaseKey,
    billingPeriod: payment.billingPeriod,
    currency: payment.token,
    mint: payment.mint,
    amount: formatBaseUnits(BigInt(payment.amountBaseUnits), payment.decimals),
    amountBaseUnits: String(payment.amountBaseUnits),
    decimals: payment.decimals,
    usdValue: payment.usdValue,
    signature: payment.signature,
    payer: payment.payer,
    status: payment.status,
    blockTime: payment.blockTime.toUTC().toISO(),
    createdAt: payment.createdAt.toUTC().toISO(),
  }
}
