import { execFile, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { isLoopbackUrl } from '#runtime/model_proxy_relay'
import { SharedRelays } from '#runtime/process/agent_network/shared_relays'
import {
  agentAddressCandidates,
  bridgeAddress,
  numberToIp,
  parseCidr,
  type Ipv4Range,
} from '#runtime/process/agent_network/addresses'
import { TABLE, hostRuleset, namespaceRuleset } from '#runtime/process/agent_network/host_rules'
import type { AgentNetworkSettings } from '#runtime/process/agent_network/network_settings'

const run = promisify(execFile)

/**
 * A network namespace per agent on the process driver (docs/security.md
 * "Agent network"). Each agent's processes run in `ah-<agent id>`, whose
 * only link is one end of a veth pair; the other end is an isolated port of
 * the service's agents bridge (`ahagents0`, AGENT_NETWORK_CIDR). From there
 * an agent reaches the model proxy relay on the bridge address and the
 * internet, nothing else on the host and no other agent (host_rules.ts).
 * The service reaches the agent's gateway at the agent's address.
 *
 * Sandbox modes never deal with any of it: the launch, a CRIU dump and a
 * restore are each wrapped by `enter()` (nsenter into the namespace), which
 * any launcher (bubblewrap, unshare, a plain uid drop) runs under.
 *
 * Namespaces and addresses follow from agent ids (every instance of the
 * service on the host agrees): the address is leased in
 * /run/agent-host/agent-net/leases (first candidate from a hash of the id,
 * the next when held). A namespace goes with the agent's stop or delete
 * (a sleeping agent has none; its wake makes it again) and idle ones are
 * cleaned at boot (sweepIdle).
 */
export const BRIDGE = 'ahagents0'
const STATE_DIR = '/run/agent-host/agent-net'
const LEASES = join(STATE_DIR, 'leases')
/** `<agent id>` here: its namespace was made to the end (a kill mid-way leaves none). */
const MADE = join(STATE_DIR, 'made')
const NSENTER = ['/usr/bin/nsenter', '/bin/nsenter'].find((path) => existsSync(path))
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path))
const IP = ['/usr/sbin/ip', '/sbin/ip', '/usr/bin/ip', '/bin/ip'].find((path) => existsSync(path))
const NFT = ['/usr/sbin/nft', '/sbin/nft', '/usr/bin/nft'].find((path) => existsSync(path))
const IPTABLES = ['/usr/sbin/iptables', '/sbin/iptables'].find((path) => existsSync(path))
/** A namespace younger than this may be one another instance is starting an agent in. */
const SWEEP_MIN_AGE_MS = 60_000

/** Why agents cannot get namespaces here, or undefined when they can. */
export function agentNetworkUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'the service does not run as root'
  if (!IP || !NFT || !NSENTER || !SETPRIV)
    return 'iproute2, nftables and nsenter (util-linux) are needed'
  return undefined
}

/** An agent's namespace, ready to run in. */
export interface AgentNetns {
  name: string
  /** Its bind mount, for nsenter --net and CRIU. */
  path: string
  /** The agent's address: the service reaches its gateway there. */
  address: string
}

/** An agent's namespace name: `ah-` and its id (a UUID). */
const AGENT_NETNS = /^ah-[\da-f]{8}(?:-[\da-f]{4}){3}-[\da-f]{12}$/

export function netnsName(agentId: string): string {
  return `ah-${agentId}`
}

/** A locally administered unicast MAC holding the IPv4 address: 02:ad:<a>:<b>:<c>:<d>. */
export function macForAddress(address: string): string {
  const octets = address.split('.').map((part) => Number(part).toString(16).padStart(2, '0'))
  return ['02', 'ad', ...octets].join(':')
}

/** The host end of the agent's veth pair (15 characters at most). */
function vethName(agentId: string): string {
  return `ahv${createHash('sha256').update(agentId).digest('hex').slice(0, 12)}`
}

async function ip(...args: string[]) {
  return run(IP!, args)
}

async function pipeInto(command: string, args: string[], input: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.once('error', reject)
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')}: ${stderr.trim()}`))
    )
    child.stdin.end(input)
  })
}

/** Commands for `ip -batch -`, one a line. */
function lines(...commands: string[]): string {
  return `${commands.join('\n')}\n`
}

/**
 * `{ command, args }` that runs `launch` inside the namespace at `netnsPath`.
 * Entering a namespace takes root: a launch that would drop to the agent's
 * uid at spawn (no sandbox) drops inside it instead, through setpriv.
 */
export function enterNetns(
  netnsPath: string,
  launch: { command: string; args: string[]; uid?: number; gid?: number }
): { command: string; args: string[] } {
  const program =
    launch.uid === undefined
      ? [launch.command, ...launch.args]
      : [
          SETPRIV!,
          `--reuid=${launch.uid}`,
          `--regid=${launch.gid ?? launch.uid}`,
          '--clear-groups',
          '--',
          launch.command,
          ...launch.args,
        ]
  return { command: NSENTER!, args: [`--net=${netnsPath}`, '--', ...program] }
}

export class AgentNetworks {
  readonly range: Ipv4Range
  readonly bridgeAddress: string
  #ready?: Promise<void>
  /** Bearer tokens whose model calls the relays answer themselves, and their model (answerModelCallsOf). */
  readonly #answeredHere = new Map<string, string>()
  readonly #relays: SharedRelays

  constructor(
    private readonly settings: AgentNetworkSettings,
    private readonly log: (message: string) => void = () => {},
    /** Where the service's instances on this host record their relay ports (shared_relays.ts). */
    relayDir?: string
  ) {
    this.range = parseCidr(settings.cidr)
    this.bridgeAddress = bridgeAddress(this.range)
    this.#relays = new SharedRelays({
      host: this.bridgeAddress,
      dir: relayDir,
      open: async (port) => {
        await run(NFT!, ['add', 'element', ...TABLE.split(' '), 'proxy_ports', `{ ${port} }`])
      },
      answersHere: (authorization) =>
        this.#answeredHere.size === 0
          ? undefined
          : this.#answeredHere.get(authorization?.replace(/^Bearer\s+/i, '') ?? ''),
      log,
    })
  }

  /** The bridge and the host's rules, once per process (rewritten at every boot). */
  ready(): Promise<void> {
    this.#ready ??= this.#setUpHost().catch((error) => {
      this.#ready = undefined
      throw error
    })
    return this.#ready
  }

  async #setUpHost() {
    const cidr = `${numberToIp(this.range.base)}/${this.range.prefix}`
    await ip('link', 'add', BRIDGE, 'type', 'bridge').catch(() => undefined)
    await ip('addr', 'replace', `${this.bridgeAddress}/${this.range.prefix}`, 'dev', BRIDGE)
    await ip('link', 'set', BRIDGE, 'up')
    await writeFile('/proc/sys/net/ipv4/ip_forward', '1')
    await pipeInto(
      NFT!,
      ['-f', '-'],
      hostRuleset({
        bridge: BRIDGE,
        bridgeAddress: this.bridgeAddress,
        cidr,
        allow: this.settings.allow,
        connected: await connectedSubnets(),
        resolvers: await resolvers(),
      })
    )
    // A firewall that drops forwarded traffic by default (Docker's FORWARD policy) would drop
    // the agents' internet too: our table has already judged it, let it through there.
    if (IPTABLES) {
      for (const rule of [
        ['-i', BRIDGE, '-j', 'ACCEPT'],
        ['-o', BRIDGE, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT'],
      ]) {
        const present = await run(IPTABLES, ['-w', '-C', 'FORWARD', ...rule]).then(
          () => true,
          () => false
        )
        if (!present) await run(IPTABLES, ['-w', '-I', 'FORWARD', ...rule]).catch(() => undefined)
      }
    }
    await mkdir(LEASES, { recursive: true, mode: 0o700 })
    await mkdir(MADE, { recursive: true, mode: 0o700 })
    this.log(`agent networks: one namespace per agent on ${BRIDGE} (${cidr})`)
  }

  /**
   * The model proxy URL agents use: a relay on the bridge address that serves
   * only `/v1/...` and forwards to `baseUrl` when that is on the host's
   * loopback; a URL elsewhere (APP_URL on another machine) is left as it is.
   */
  async modelProxyFor(baseUrl: string): Promise<string> {
    const target = new URL(baseUrl)
    if (!isLoopbackUrl(target)) return baseUrl
    await this.ready()
    const port = await this.#relays.own(target)
    // An agent adopted from an instance that died keeps the relay that one gave it. In the
    // background: ports recorded by instances long gone must not hold this start back.
    void this.#relays.others(target).catch((error) => this.log(`relays: ${error.message}`))
    const local = new URL(baseUrl)
    local.hostname = this.bridgeAddress
    local.port = String(port)
    return local.toString().replace(/\/$/, '')
  }

  /**
   * The relays answer the model calls made with `token` themselves, never
   * forwarding them (a template's framework: model_proxy_relay.ts's
   * answerHere; `model` is the one they list), until the returned function
   * is called.
   */
  answerModelCallsOf(token: string, model: string): () => void {
    this.#answeredHere.set(token, model)
    return () => this.#answeredHere.delete(token)
  }

  /** The agent's namespace, made when it has none (idempotent: a restart or adoption keeps it). */
  async prepare(agentId: string): Promise<AgentNetns> {
    await this.ready()
    const name = netnsName(agentId)
    const path = `/run/netns/${name}`
    if (existsSync(path)) {
      const address = await namespaceAddress(name)
      if (address && (await this.#madeToTheEnd(agentId, name))) return { name, path, address }
      // Half made (the service killed while making it: its loopback, link, route or rules
      // may be missing, and an agent started in it would never be reached): made again.
      await this.teardown(agentId)
    }
    const address = await this.#lease(agentId)
    const veth = vethName(agentId)
    try {
      // Three commands, not eleven: each spawn forks the service's large process (~15-20 ms
      // of its main thread on a busy host), and a burst makes hundreds of namespaces.
      // `ip -batch` stops at the first failure, as one command after another did.
      await pipeInto(
        IP!,
        ['-batch', '-'],
        lines(
          `netns add ${name}`,
          // The agent's side gets a MAC derived from its address: a namespace made
          // again at the same address (a restart, a wake) is reached at once, not
          // after the host's neighbour entry for the old MAC goes stale (20-50 s).
          `link add ${veth} type veth peer name eth0 address ${macForAddress(address)} netns ${name}`,
          `link set ${veth} master ${BRIDGE}`,
          `link set dev ${veth} type bridge_slave isolated on`,
          `link set ${veth} up`
        )
      )
      await pipeInto(
        IP!,
        ['-n', name, '-batch', '-'],
        lines(
          `addr add ${address}/${this.range.prefix} dev eth0`,
          'link set lo up',
          'link set eth0 up',
          `route add default via ${this.bridgeAddress}`
        )
      )
      const inside = enterNetns(path, {
        command: '/bin/sh',
        args: [
          '-c',
          'echo 1 > /proc/sys/net/ipv4/conf/eth0/route_localnet && exec "$0" -f -',
          NFT!,
        ],
      })
      await pipeInto(inside.command, inside.args, namespaceRuleset(this.bridgeAddress))
      await writeFile(join(MADE, agentId), '', { mode: 0o600 })
    } catch (error) {
      await this.teardown(agentId)
      throw new Error(`could not make the agent's network namespace: ${(error as Error).message}`)
    }
    return { name, path, address }
  }

  /**
   * Whether the namespace was made to its last step. One something runs in
   * was (processes start only in a finished one; a namespace made before
   * the marker existed is marked so).
   */
  async #madeToTheEnd(agentId: string, name: string): Promise<boolean> {
    if (existsSync(join(MADE, agentId))) return true
    const { stdout } = await ip('netns', 'pids', name).catch(() => ({ stdout: '' }))
    if (!stdout.trim()) return false
    await writeFile(join(MADE, agentId), '', { mode: 0o600 })
    return true
  }

  /** Takes the first free candidate address, atomically (a lease file made exclusively). */
  async #lease(agentId: string): Promise<string> {
    for (const address of agentAddressCandidates(this.range, agentId)) {
      const file = join(LEASES, address)
      try {
        await writeFile(file, agentId, { flag: 'wx', mode: 0o600 })
        return address
      } catch {
        const holder = await readFile(file, 'utf8').catch(() => '')
        if (holder === agentId) return address
      }
    }
    throw new Error(`no free address left in AGENT_NETWORK_CIDR ${this.settings.cidr}`)
  }

  /** Removes the agent's namespace, its veth pair and its address lease. */
  async teardown(agentId: string): Promise<void> {
    const name = netnsName(agentId)
    await rm(join(MADE, agentId), { force: true })
    // One command: the namespace (its end of the pair goes with it), then the host's end if
    // it outlived it; -force goes on past what is already gone.
    const gone = [`link del ${vethName(agentId)}`]
    if (existsSync(`/run/netns/${name}`)) gone.unshift(`netns del ${name}`)
    await pipeInto(IP!, ['-force', '-batch', '-'], lines(...gone)).catch(() => undefined)
    let leases: string[] = []
    try {
      leases = await readdir(LEASES)
    } catch {
      return
    }
    for (const lease of leases) {
      const file = join(LEASES, lease)
      if ((await readFile(file, 'utf8').catch(() => '')) === agentId)
        await rm(file, { force: true })
    }
  }

  /**
   * Removes the namespaces nothing runs in (left by a crash of the service,
   * or by agents gone meanwhile) except the ones `leaveAlone` names; a very young
   * one is left alone (another instance may be about to start an agent in it).
   */
  async sweepIdle(leaveAlone: (agentId: string) => boolean): Promise<string[]> {
    let names: string[] = []
    try {
      const entries = await readdir('/run/netns')
      names = entries.filter((name) => AGENT_NETNS.test(name))
    } catch {
      return []
    }
    const removed: string[] = []
    for (const name of names) {
      const agentId = name.slice(3)
      if (leaveAlone(agentId)) continue
      const info = await stat(`/run/netns/${name}`).catch(() => undefined)
      const minAgeMs = this.settings.sweepMinAgeMs ?? SWEEP_MIN_AGE_MS
      if (info && Date.now() - info.mtimeMs < minAgeMs) continue
      const { stdout } = await ip('netns', 'pids', name).catch(() => ({ stdout: 'unknown' }))
      if (stdout.trim()) continue
      await this.teardown(agentId)
      removed.push(agentId)
    }
    return removed
  }

  async close(): Promise<void> {
    await this.#relays.close()
  }
}

async function namespaceAddress(name: string): Promise<string | undefined> {
  try {
    const { stdout } = await ip('-n', name, '-j', '-4', 'addr', 'show', 'dev', 'eth0')
    const [link] = JSON.parse(stdout) as Array<{ addr_info?: Array<{ local?: string }> }>
    return link?.addr_info?.[0]?.local
  } catch {
    return undefined
  }
}

/** The host's directly connected IPv4 subnets other than the agents' bridge. */
export async function connectedSubnets(): Promise<string[]> {
  const { stdout } = await run(IP ?? 'ip', ['-j', '-4', 'route', 'show', 'scope', 'link'])
  const routes = JSON.parse(stdout) as Array<{ dst?: string; dev?: string }>
  return routes
    .filter((route) => route.dev !== BRIDGE && route.dst && route.dst !== 'default')
    .map((route) => (route.dst!.includes('/') ? route.dst! : `${route.dst}/32`))
}

/** The IPv4 name servers of /etc/resolv.conf (off-loopback ones: agents cannot reach the host's). */
async function resolvers(): Promise<string[]> {
  const text = await readFile('/etc/resolv.conf', 'utf8').catch(() => '')
  return [...text.matchAll(/^nameserver\s+(\d+\.\d+\.\d+\.\d+)\s*$/gm)]
    .map((match) => match[1])
    .filter((address) => !address.startsWith('127.'))
}
