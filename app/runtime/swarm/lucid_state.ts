import { hkdfSync } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import type { StateDatabase } from '#runtime/swarm/state_store'

/** The swarm state store on the service's own database connection. */
export const lucidStateDatabase: StateDatabase = {
  transaction: (work) =>
    db.transaction((trx) => work((sql, bindings) => trx.rawQuery(sql, (bindings ?? []) as never))),
}

/** The key swarm snapshots are encrypted with: derived from APP_KEY, never APP_KEY itself. */
export function swarmStateKey(appKey: string): Buffer {
  return Buffer.from(hkdfSync('sha256', appKey, 'agent-host', 'swarm-state', 32))
}
