/**
 * The host's side of the agents' network, as one nftables table the service
 * owns (`inet agent_host_net`). Written with `add` and `flush` only, so it
 * is idempotent and every service instance on the host may (re)write it at
 * its boot without disturbing another's model proxy relay ports (a set that
 * is only ever added to).
 */
export const TABLE = 'inet agent_host_net'

/**
 * Destinations agents never reach, unless AGENT_NETWORK_ALLOW names them:
 * "this" network, private (RFC 1918), CGNAT, loopback, link-local (cloud
 * metadata), IETF protocol assignments, benchmarking, multicast and reserved.
 */
export const BLOCKED_RANGES = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/3',
]

export interface HostRuleSettings {
  bridge: string
  bridgeAddress: string
  cidr: string
  /** Private destinations agents may reach after all (AGENT_NETWORK_ALLOW). */
  allow: string[]
  /** The host's directly connected subnets (its LAN): blocked like private ranges. */
  connected: string[]
  /** The host's DNS resolvers (/etc/resolv.conf): reachable on port 53 only. */
  resolvers: string[]
}

function elements(set: string, values: string[]): string[] {
  return values.length ? [`add element ${TABLE} ${set} { ${values.join(', ')} }`] : []
}

/**
 * - input: from the agents' bridge the host accepts only the model proxy
 *   relays' ports on the bridge address (and replies to its own connections
 *   to the agents' gateways); its loopback services, its other addresses and
 *   ports are dropped;
 * - forward: nothing is forwarded into the bridge but replies; from it,
 *   IPv6, spoofed sources, private, link-local, CGNAT and the host's own
 *   subnets are dropped (the resolvers on port 53 and AGENT_NETWORK_ALLOW
 *   excepted); the rest (the internet) is masqueraded out.
 * Agents on the bridge never reach each other: each bridge port is isolated
 * (see AgentNetworks), so their frames never cross.
 */
export function hostRuleset(settings: HostRuleSettings): string {
  const { bridge } = settings
  const chain = (name: string, spec: string) => [
    `add chain ${TABLE} ${name} { ${spec} }`,
    `flush chain ${TABLE} ${name}`,
  ]
  const rule = (name: string, body: string) => `add rule ${TABLE} ${name} ${body}`
  return [
    `add table ${TABLE}`,
    `add set ${TABLE} proxy_ports { type inet_service; }`,
    `add set ${TABLE} allowed { type ipv4_addr; flags interval; auto-merge; }`,
    `flush set ${TABLE} allowed`,
    ...elements('allowed', settings.allow),
    `add set ${TABLE} blocked { type ipv4_addr; flags interval; auto-merge; }`,
    `flush set ${TABLE} blocked`,
    ...elements('blocked', [...BLOCKED_RANGES, ...settings.connected]),
    `add set ${TABLE} resolvers { type ipv4_addr; }`,
    `flush set ${TABLE} resolvers`,
    ...elements('resolvers', settings.resolvers),

    ...chain('input', 'type filter hook input priority -10; policy accept;'),
    rule('input', `iifname "${bridge}" ct state established,related accept`),
    rule(
      'input',
      `iifname "${bridge}" ip daddr ${settings.bridgeAddress} tcp dport @proxy_ports accept`
    ),
    rule('input', `iifname "${bridge}" drop`),

    ...chain('forward', 'type filter hook forward priority -10; policy accept;'),
    rule('forward', `oifname "${bridge}" ct state established,related accept`),
    rule('forward', `oifname "${bridge}" drop`),
    rule('forward', `iifname "${bridge}" meta nfproto ipv6 drop`),
    rule('forward', `iifname "${bridge}" ip saddr != ${settings.cidr} drop`),
    rule('forward', `iifname "${bridge}" ip daddr @allowed accept`),
    rule('forward', `iifname "${bridge}" ip daddr @resolvers udp dport 53 accept`),
    rule('forward', `iifname "${bridge}" ip daddr @resolvers tcp dport 53 accept`),
    rule('forward', `iifname "${bridge}" ip daddr @blocked drop`),
    rule('forward', `iifname "${bridge}" fib daddr type { local, broadcast, multicast } drop`),

    ...chain('postrouting', 'type nat hook postrouting priority 100;'),
    rule('postrouting', `ip saddr ${settings.cidr} oifname != "${bridge}" masquerade`),
    '',
  ].join('\n')
}

/**
 * Inside an agent's namespace: the service's connections to the agent's
 * address (from the bridge address) go to the gateway listening on the
 * namespace's loopback, where frameworks bind (`route_localnet` lets them).
 */
export function namespaceRuleset(bridgeAddress: string): string {
  return [
    'table ip agent_gateway {',
    '  chain prerouting {',
    '    type nat hook prerouting priority -100;',
    `    iifname "eth0" ip saddr ${bridgeAddress} meta l4proto tcp dnat to 127.0.0.1`,
    '  }',
    '}',
    '',
  ].join('\n')
}
