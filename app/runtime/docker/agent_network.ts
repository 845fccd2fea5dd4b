import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import type Docker from 'dockerode'
import {
  isLoopbackUrl,
  startModelProxyRelay,
  type ModelProxyRelay,
} from '#runtime/model_proxy_relay'
import { connectedSubnets } from '#runtime/process/agent_network/agent_networks'
import { agentNetworkAllowList } from '#runtime/process/agent_network/network_settings'
import { BLOCKED_RANGES } from '#runtime/process/agent_network/host_rules'

const run = promisify(execFile)

/** The name containers use for the host (Docker's `host-gateway`). */
export const HOST_ALIAS = 'host.docker.internal'
/** Our own chain in the host's INPUT: what agent networks may reach on the host itself. */
const CHAIN = 'AGENT-HOST-INPUT'
/** Our own chain in DOCKER-USER (the head of FORWARD): where agent networks may not go. */
const FORWARD_CHAIN = 'AGENT-HOST-FORWARD'

/** Linux interface name of an agent network's bridge (15 characters at most). */
export function bridgeName(agentId: string): string {
  return `ah-${agentId.replaceAll('-', '').slice(0, 12)}`
}

/**
 * Containers cannot reach the service on the host's loopback, and must not
 * reach anything else on the host. So, for a local engine:
 * - a relay listens on the default bridge's gateway (what `host-gateway`
 *   means) and forwards model proxy requests (`/v1/...`) only, to the
 *   service; everything else answers 404;
 * - agents get the model proxy at `http://host.docker.internal:<relay>/v1`;
 * - when this process may (root, iptables), each agent bridge may reach
 *   the host only at the relay's port (replies to the host's own
 *   connections pass): the host's other services are rejected;
 * - forwarded, the agent bridge reaches neither private, link-local nor
 *   CGNAT ranges nor the host's own subnets (AGENT_NETWORK_ALLOW excepted),
 *   the same list as the process driver's (host_rules.ts); the internet
 *   stays reachable. Other agents' containers sit on other bridges, which
 *   the engine's own isolation chains keep apart (and inside its bridge an
 *   agent has no neighbour: icc off).
 * A remote engine (DOCKER_HOST over TCP) is another machine: its firewall
 * is its operator's, and APP_URL must be reachable from it.
 */
export class AgentNetworkGuard {
  /** One relay per service origin (one in production; tests run several). */
  readonly #relays = new Map<string, Promise<ModelProxyRelay>>()
  #firewall?: Promise<boolean>

  constructor(
    private readonly docker: Docker,
    private readonly log: (message: string) => void = () => {}
  ) {}

  /** The model proxy URL a container uses, and the extra hosts it needs. */
  async modelProxyFor(baseUrl: string): Promise<{ baseUrl: string; extraHosts: string[] }> {
    const target = new URL(baseUrl)
    if (!isLoopbackUrl(target) || !localEngine()) return { baseUrl, extraHosts: [] }
    const relay = await this.#startRelay(target)
    const local = new URL(baseUrl)
    local.hostname = HOST_ALIAS
    local.port = String(relay.port)
    return {
      baseUrl: local.toString().replace(/\/$/, ''),
      extraHosts: [`${HOST_ALIAS}:host-gateway`],
    }
  }

  #startRelay(target: URL) {
    const existing = this.#relays.get(target.origin)
    if (existing) return existing
    const relay = (async () => {
      const bridge = await this.docker.getNetwork('bridge').inspect()
      const host = bridge.IPAM?.Config?.[0]?.Gateway ?? '172.17.0.1'
      const started = await startModelProxyRelay({
        host,
        target,
        preferredPort: Number(target.port) || 80,
      })
      this.log(`model proxy relay for agent containers on ${host}:${started.port}`)
      return started
    })()
    this.#relays.set(target.origin, relay)
    return relay
  }

  /** Network options of an agent's own bridge: a known interface name, no traffic between containers. */
  networkOptions(agentId: string): Record<string, string> {
    return {
      'com.docker.network.bridge.name': bridgeName(agentId),
      'com.docker.network.bridge.enable_icc': 'false',
    }
  }

  /** Lets the agent's bridge reach the host at the relay only; false when the host firewall is not ours to manage. */
  async confine(agentId: string): Promise<boolean> {
    if (!(await this.#firewallReady())) return false
    const relays = await Promise.all(this.#relays.values())
    const bridge = bridgeName(agentId)
    await this.release(agentId)
    // Appended in order: replies to the host's own connections, the relays, then nothing else.
    const rule = (...match: string[]) => iptables('-A', CHAIN, '-i', bridge, ...match)
    await rule('-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT')
    for (const relay of relays) {
      await rule('-p', 'tcp', '-d', relay.host, '--dport', String(relay.port), '-j', 'ACCEPT')
    }
    await rule('-j', 'REJECT')
    const forward = (...match: string[]) => iptables('-A', FORWARD_CHAIN, '-i', bridge, ...match)
    await forward('-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'RETURN')
    for (const range of agentNetworkAllowList()) await forward('-d', range, '-j', 'RETURN')
    for (const range of [...BLOCKED_RANGES, ...(await connectedSubnets())]) {
      await forward('-d', range, '-j', 'REJECT')
    }
    return true
  }

  /** Removes the agent's rules (network removed). */
  async release(agentId: string) {
    if (!(await this.#firewallReady())) return
    const bridge = bridgeName(agentId)
    for (const chain of [CHAIN, FORWARD_CHAIN]) {
      const { stdout } = await run('iptables', ['-w', '-S', chain])
      for (const rule of stdout.split('\n')) {
        if (!rule.startsWith(`-A ${chain} `) || !rule.includes(` -i ${bridge} `)) continue
        await iptables('-D', ...rule.slice(3).split(' '))
      }
    }
  }

  #firewallReady() {
    this.#firewall ??= (async () => {
      if (!localEngine() || process.getuid?.() !== 0) return false
      try {
        await run('iptables', ['-w', '-N', CHAIN]).catch(() => {})
        const check = await run('iptables', ['-w', '-C', 'INPUT', '-j', CHAIN]).then(
          () => true,
          () => false
        )
        if (!check) await iptables('-I', 'INPUT', '-j', CHAIN)
        await run('iptables', ['-w', '-N', FORWARD_CHAIN]).catch(() => {})
        // DOCKER-USER is the engine's place for rules of our own, ahead of its own forwarding.
        const head = await run('iptables', ['-w', '-S', 'DOCKER-USER']).then(
          () => 'DOCKER-USER',
          () => 'FORWARD'
        )
        const jumps = await run('iptables', ['-w', '-C', head, '-j', FORWARD_CHAIN]).then(
          () => true,
          () => false
        )
        if (!jumps) await iptables('-I', head, '-j', FORWARD_CHAIN)
        return true
      } catch (error) {
        this.log(`agent networks are not confined: ${(error as Error).message}`)
        return false
      }
    })()
    return this.#firewall
  }

  async close() {
    for (const pending of this.#relays.values()) {
      const relay = await pending.catch(() => undefined)
      relay?.server.close()
    }
    this.#relays.clear()
  }
}

async function iptables(...args: string[]) {
  await run('iptables', ['-w', ...args])
}

/** The engine runs on this machine (its socket), not across a network. */
export function localEngine(): boolean {
  const host = process.env.DOCKER_HOST
  return !host || host.startsWith('unix://')
}
