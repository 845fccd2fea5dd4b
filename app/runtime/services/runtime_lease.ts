import db from '@adonisjs/lucid/services/db'
import { deadHoldersIn } from '#core/jobs/instance'

/**
 * A named lease in PostgreSQL: one holder at a time; a holder renews it
 * before it lapses, and anyone may take a lapsed one, or at once one whose
 * holder provably died (holderIsGone).
 * The upsert is one statement, so two instances never both win.
 */
export async function claimLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
  const result = await db.rawQuery(
    `insert into runtime_leases (name, holder, expires_at)
     values (?, ?, now() + (? * interval '1 millisecond'))
     on conflict (name) do update
       set holder = excluded.holder, expires_at = excluded.expires_at
       where runtime_leases.holder = excluded.holder or runtime_leases.expires_at < now()
          or runtime_leases.holder = any(?::text[])
     returning holder`,
    [name, holder, ttlMs, await deadHoldersIn('runtime_leases', 'holder')]
  )
  return result.rows.length > 0
}

/** Gives the lease up at once (a clean shutdown), if `holder` has it. */
export async function releaseLease(name: string, holder: string): Promise<void> {
  await db.from('runtime_leases').where({ name, holder }).delete()
}

/** Who holds `name` now, if anyone does. */
export async function leaseHolder(name: string): Promise<string | undefined> {
  const row = await db
    .from('runtime_leases')
    .where('name', name)
    .where('expires_at', '>', new Date())
    .first()
  return row?.holder
}
