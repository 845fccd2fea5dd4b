import { hostname } from 'node:os'

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
