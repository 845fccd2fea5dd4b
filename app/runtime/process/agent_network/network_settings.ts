/**
 * The agents' network settings from the environment (AGENT_NETWORK,
 * AGENT_NETWORK_CIDR, AGENT_NETWORK_ALLOW; docs/security.md "Agent network").
 */

/** Where AGENT_NETWORK_* leave the agents' network. */
export interface AgentNetworkSettings {
  /** The agents' bridge range (AGENT_NETWORK_CIDR); default 10.213.0.0/16. */
  cidr: string
  /** Private destinations agents may still reach (AGENT_NETWORK_ALLOW, comma-separated CIDRs). */
  allow: string[]
  /** How young a namespace a sweep leaves alone (another instance may be starting in it); 60 s. */
  sweepMinAgeMs?: number
}

export const DEFAULT_AGENT_NETWORK_CIDR = '10.213.0.0/16'

/** The settings of the environment; undefined when AGENT_NETWORK=host keeps the host's network. */
export function agentNetworkSettings(
  env: NodeJS.ProcessEnv = process.env
): AgentNetworkSettings | undefined {
  if (env.AGENT_NETWORK === 'host') return undefined
  return {
    cidr: env.AGENT_NETWORK_CIDR || DEFAULT_AGENT_NETWORK_CIDR,
    allow: agentNetworkAllowList(env),
  }
}

/** AGENT_NETWORK_ALLOW: private CIDRs agents may still reach (both drivers). */
export function agentNetworkAllowList(env: NodeJS.ProcessEnv = process.env): string[] {
  return (env.AGENT_NETWORK_ALLOW ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
}
