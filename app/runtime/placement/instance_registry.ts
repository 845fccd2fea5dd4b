import { hostname } from 'node:os'
import db from '@adonisjs/lucid/services/db'
import { holderIsGone, INSTANCE_ID } from '#core/jobs/instance'

/** A row older than this is an instance that stopped renewing (hung, or on a host that died). */
const SEEN_WITHIN_MS = 20_000

export interface PeerInstance {
  id: string
  peerUrl: string
}

/**
 * This service instance in `runtime_instances`: renewed every tick with the
 * address of its peer link, so other instances on the host know it runs,
 * reach it for an agent it holds, and hand their agents over to it at a
 * clean shutdown. An instance is alive while it renews and (on this host)
 * its process exists.
 */
export class InstanceRegistry {
  readonly id = INSTANCE_ID
  readonly host = hostname()

  constructor(private readonly peerUrl: () => string) {}

  async heartbeat(): Promise<void> {
    await db.rawQuery(
      `insert into runtime_instances (id, host, peer_url, seen_at) values (?, ?, ?, now())
       on conflict (id) do update set peer_url = excluded.peer_url, seen_at = now()`,
      [this.id, this.host, this.peerUrl()]
    )
  }

  /** Said at a clean shutdown's start: nothing is handed over to it any more. */
  async markStopping(): Promise<void> {
    await db.from('runtime_instances').where('id', this.id).update({ stopping: true })
  }

  async remove(): Promise<void> {
    await db.from('runtime_instances').where('id', this.id).delete()
  }

  /** The peer link of `instanceId` while it is alive; undefined otherwise. */
  async peer(instanceId: string): Promise<PeerInstance | undefined> {
    if (holderIsGone(instanceId)) return undefined
    const row = await db
      .from('runtime_instances')
      .where('id', instanceId)
      .where('seen_at', '>', new Date(Date.now() - SEEN_WITHIN_MS))
      .first()
    return row ? { id: row.id, peerUrl: row.peer_url } : undefined
  }

  /** Other instances alive on this host that are not stopping (who can take agents over). */
  async livePeers(): Promise<PeerInstance[]> {
    const rows = await db
      .from('runtime_instances')
      .where('host', this.host)
      .whereNot('id', this.id)
      .where('stopping', false)
      .where('seen_at', '>', new Date(Date.now() - SEEN_WITHIN_MS))
    return rows
      .filter((row) => !holderIsGone(row.id))
      .map((row) => ({ id: row.id, peerUrl: row.peer_url }))
  }

  /** Rows of instances of this host that died (their process is gone) or long stopped renewing. */
  async prune(): Promise<void> {
    const rows = await db.from('runtime_instances').where('host', this.host).select('id')
    const dead = rows.map((row) => row.id as string).filter(holderIsGone)
    await db
      .from('runtime_instances')
      .where((query) => {
        query.whereIn('id', dead).orWhere('seen_at', '<', new Date(Date.now() - 3_600_000))
      })
      .delete()
  }
}
