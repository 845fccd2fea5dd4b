import {
  AgentNetworks,
  agentNetworkUnavailable,
  enterNetns,
} from '#runtime/process/agent_network/agent_networks'
import { isLoopbackUrl } from '#runtime/model_proxy_relay'
import {
  agentNetworkSettings,
  type AgentNetworkSettings,
} from '#runtime/process/agent_network/network_settings'

/** A launch; `uid`/`gid`: dropped to at spawn (kept by `unchanged`, done inside by `enterNetns`). */
type Launch = { command: string; args: string[]; uid?: number; gid?: number }
type Wrap = (launch: Launch) => Launch

/** What a launch needs of the agent's network. */
export interface PreparedNetwork {
  /** Where the service reaches the gateway; unset: the host's loopback (shared network). */
  address?: string
  /** The model proxy as the agent reaches it. */
  modelProxy: { baseUrl: string; token: string; model: string }
  /** Wraps a launch (the framework's, CRIU's) so that it runs in the agent's namespace. */
  enter: Wrap
}

const unchanged: Wrap = (launch) => ({
  command: launch.command,
  args: launch.args,
  uid: launch.uid,
  gid: launch.gid,
})
let sharedNetworkSaid = false

/**
 * The process driver's side of agent networks: a namespace per agent where
 * the host allows it (root, iproute2, nftables, nsenter) and AGENT_NETWORK
 * is not `host`; otherwise agents share the host's network, as the log says
 * once. Every sandbox mode gets the same: the driver wraps whatever launch
 * the sandbox made with `enter`.
 */
export class AgentNetworking {
  readonly networks?: AgentNetworks

  constructor(
    settings: AgentNetworkSettings | null | undefined,
    private readonly log: (message: string) => void,
    /** Where the instances sharing the storage record their model proxy relay ports. */
    relayDir?: string
  ) {
    const chosen = settings === undefined ? agentNetworkSettings() : (settings ?? undefined)
    const unavailable = chosen ? agentNetworkUnavailable() : 'AGENT_NETWORK=host'
    if (chosen && !unavailable) this.networks = new AgentNetworks(chosen, log, relayDir)
    else if (!sharedNetworkSaid) {
      sharedNetworkSaid = true
      log(
        `agents share the host's network (${unavailable}): they reach its loopback services and each other`
      )
    }
  }

  async prepare(
    agentId: string,
    modelProxy: PreparedNetwork['modelProxy']
  ): Promise<PreparedNetwork> {
    if (!this.networks) return { modelProxy, enter: unchanged }
    const netns = await this.networks.prepare(agentId)
    return {
      address: netns.address,
      modelProxy: { ...modelProxy, baseUrl: await this.networks.modelProxyFor(modelProxy.baseUrl) },
      enter: (launch) => enterNetns(netns.path, launch),
    }
  }

  /**
   * The model calls made with `modelProxy.token` through a relay (a model
   * proxy on this host's loopback) answered by the relay itself until the
   * returned function is called; undefined when agents do not reach the
   * model proxy through one.
   */
  answerModelCallsOf(modelProxy: PreparedNetwork['modelProxy']): (() => void) | undefined {
    if (!this.networks || !isLoopbackUrl(new URL(modelProxy.baseUrl))) return undefined
    return this.networks.answerModelCallsOf(modelProxy.token, modelProxy.model)
  }

  /** Makes the agent's namespace again before a start (a stop took it); its address. */
  async restore(agentId: string): Promise<string | undefined> {
    if (!this.networks) return undefined
    const netns = await this.networks.prepare(agentId)
    return netns.address
  }

  async teardown(agentId: string): Promise<void> {
    await this.networks?.teardown(agentId)
  }

  /** Removes idle namespaces of agents not in use here (boot, sweeps). */
  async sweep(leaveAlone: (agentId: string) => boolean): Promise<void> {
    const removed = (await this.networks?.sweepIdle(leaveAlone)) ?? []
    if (removed.length) this.log(`removed idle agent network namespaces: ${removed.join(', ')}`)
  }

  async close(): Promise<void> {
    await this.networks?.close()
  }
}
