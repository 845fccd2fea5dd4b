import { createHash } from 'node:crypto'

/** An IPv4 range in CIDR form, as numbers. */
export interface Ipv4Range {
  base: number
  prefix: number
  size: number
}

export function ipToNumber(address: string): number {
  const parts = address.split('.').map(Number)
  if (parts.length !== 4 || parts.some((part) => !Number.isInteger(part) || part < 0 || part > 255))
    throw new Error(`"${address}" is not an IPv4 address`)
  return parts.reduce((value, part) => value * 256 + part, 0)
}

export function numberToIp(value: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join('.')
}

/** Parses `a.b.c.d/n` (the base is aligned down to the prefix). */
export function parseCidr(cidr: string): Ipv4Range {
  const [address, prefixText] = cidr.trim().split('/')
  const prefix = Number(prefixText ?? 32)
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > 32)
    throw new Error(`"${cidr}" is not an IPv4 CIDR`)
  const size = 2 ** (32 - prefix)
  const base = Math.floor(ipToNumber(address) / size) * size
  return { base, prefix, size }
}

/** The range's first usable address: the bridge (the host side, where the model proxy relay listens). */
export function bridgeAddress(range: Ipv4Range): string {
  return numberToIp(range.base + 1)
}

/**
 * The agent's candidate addresses in order: the first one follows from its
 * id alone (every service instance on the host computes the same), the next
 * ones are tried when another agent holds it. Network, bridge and broadcast
 * addresses are skipped.
 */
export function* agentAddressCandidates(range: Ipv4Range, agentId: string): Generator<string> {
  const usable = range.size - 3
  if (usable < 1) throw new Error('AGENT_NETWORK_CIDR holds no address for agents (/29 or larger)')
  const start =
    createHash('sha256').update(`agent-net:${agentId}`).digest().readUInt32BE(0) % usable
  for (let offset = 0; offset < usable; offset++) {
    yield numberToIp(range.base + 2 + ((start + offset) % usable))
  }
}
