import { createHmac, hkdfSync } from 'node:crypto'
import { appKey } from '#config/app'

/** Providers that ignore dots in the local part (and alias each other). */
const DOTLESS_DOMAINS: Record<string, string> = {
  'gmail.com': 'gmail.com',
  'googlemail.com': 'gmail.com',
}

/**
 * The mailbox an address delivers to, as far as common aliasing goes:
 * lower case, `+tag` dropped, and for Gmail dots dropped and googlemail.com
 * folded into gmail.com. `A.Lice+2@GoogleMail.com` -> `alice@gmail.com`.
 */
export function canonicalEmail(email: string): string {
  const address = email.trim().toLowerCase()
  const at = address.lastIndexOf('@')
  if (at < 1) return address
  let local = address.slice(0, at).split('+')[0]
  let domain = address.slice(at + 1)
  if (DOTLESS_DOMAINS[domain]) {
    domain = DOTLESS_DOMAINS[domain]
    local = local.replaceAll('.', '')
  }
  return `${local}@${domain}`
}

/** A client address as a keyed hash: comparable, not reversible without APP_KEY. */
let hashKey: Buffer | undefined
export function clientAddressHash(ip: string): string {
  hashKey ??= Buffer.from(hkdfSync('sha256', appKey.release(), 'agent-host', 'client-ip', 32))
  return createHmac('sha256', hashKey).update(ip).digest('hex')
}
