import db from '@adonisjs/lucid/services/db'
import type { QueryClientContract, TransactionClientContract } from '@adonisjs/lucid/types/database'
import { foundingMemberSlots } from '#config/plans'
import { ValidationException } from '#core/exceptions/api_exceptions'

export interface FoundingStatus {
  maxSlots: number
  taken: number
  remaining: number
}

export const SOLD_OUT_MESSAGE = `All ${foundingMemberSlots} Founding Member slots are sold`

export async function foundingSlotsTaken(
  client: QueryClientContract = db.connection()
): Promise<number> {
  const row = await client.from('founding_slots').count('* as taken').first()
  return Number(row?.taken ?? 0)
}

/** The `founding` object of GET /features. */
export async function foundingStatus(): Promise<FoundingStatus> {
  const taken = await foundingSlotsTaken()
  return {
    maxSlots: foundingMemberSlots,
    taken,
    remaining: Math.max(0, foundingMemberSlots - taken),
  }
}

/**
 * Sells the next Founding Member slot to the account, in the activation's
 * transaction. Buyers queue on one advisory lock, so the count they read is
 * exact; the slot number's primary key backs that up. 400 when all slots are
 * sold (the caller's transaction then rolls back: nothing is recorded).
 */
export async function claimFoundingSlot(
  trx: TransactionClientContract,
  input: { userId: string; paymentId: string }
): Promise<number> {
  await trx.rawQuery('select pg_advisory_xact_lock(hashtext(?))', ['billing:founding_slots'])
  const taken = await foundingSlotsTaken(trx)
  if (taken >= foundingMemberSlots) {
    throw new ValidationException(
      `${SOLD_OUT_MESSAGE}; your payment was not recorded, so its transaction can still pay for another plan within 30 minutes`
    )
  }
  // Numbered after the highest slot sold, so a removed row never causes a clash.
  const highest = await trx.from('founding_slots').max('slot as slot').first()
  const slot = Number(highest?.slot ?? 0) + 1
  await trx.table('founding_slots').insert({
    slot,
    user_id: input.userId,
    payment_id: input.paymentId,
    created_at: new Date(),
  })
  return slot
}
