import { hostname } from 'node:os'
import db from '@adonisjs/lucid/services/db'

/**
 * This process as the holder of leases, claims and holds: host, pid and
 * start time (a restarted service, even with a recycled pid, is another
 * holder).
 */
export const INSTANCE_ID = `${hostname()}:${process.pid}:${Date.now().toString(36)}`

/**
 * True when `holder` (an INSTANCE_ID) is provably dead: it ran on this host
 * and its pid is gone. A holder on another host, or whose pid lives, is
 * left to the expiry of what it holds.
 */
export function holderIsGone(holder: string): boolean {
  const [host, pid] = holder.split(':')
  if (host !== hostname() || !/^\d+$/.test(pid ?? '')) return false
  if (Number(pid) === process.pid) return holder !== INSTANCE_ID
  try {
    process.kill(Number(pid), 0)
    return false
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH'
  }
}

/**
 * The holders named in `table.column` that are provably dead (holderIsGone):
 * what they hold may be taken over at once instead of after its expiry.
 */
export async function deadHoldersIn(table: string, column: string): Promise<string[]> {
  const rows: Record<string, string>[] = await db.from(table).distinct(column).whereNotNull(column)
  return rows.map((row) => row[column]).filter(holderIsGone)
}
