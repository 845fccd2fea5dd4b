/**
 * A real multi-node Docker Swarm on this one machine, for the swarm tests
 * and bench/scale-out: each node is a Docker engine (Debian's docker.io
 * dockerd, containerd, runc, copied from this host into a small image built
 * here, no registry) in a container of the host's engine, with its own
 * network address, data root, containers and swarm membership. Killing a
 * node's container kills its engine and every container it runs, as a power
 * cut of that machine would.
 *
 * Nodes run with every capability but CAP_SYS_RESOURCE (this machine's
 * bounding set lacks it, so `--privileged` is refused), seccomp and
 * AppArmor unconfined, /proc and /sys writable and all devices allowed: what
 * an engine needs to run containers itself.
 */
import { createHash } from 'node:crypto'
import { existsSync, realpathSync, statSync } from 'node:fs'
import { chmod, copyFile, cp, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { spawn } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import Docker from 'dockerode'
import type { ContainerLaunch } from '#plugins/types'
import { DockerImages } from '#runtime/docker/docker_images'
import { sharedLibraries } from '#runtime/docker/local_images'
import { ENGINE_LABEL } from '#runtime/swarm/node_engines'

/** What a node's image is made of: this host's engine, its runtime and their tools. */
const BINARIES = [
  '/usr/sbin/dockerd',
  '/usr/sbin/docker-proxy',
  '/usr/bin/docker-init',
  '/usr/bin/containerd',
  '/usr/bin/containerd-shim-runc-v2',
  '/usr/sbin/runc',
  '/usr/sbin/xtables-nft-multi',
]
const BUSYBOX = ['/bin/busybox', '/usr/bin/busybox'].find((path) => existsSync(path))
const XTABLES = '/usr/lib/x86_64-linux-gnu/xtables'
const IPTABLES = [
  'iptables',
  'iptables-save',
  'iptables-restore',
  'ip6tables',
  'ip6tables-save',
  'ip6tables-restore',
]
const APPLETS = ['sh', 'mount', 'cat', 'sleep', 'ls', 'grep', 'rm', 'mkdir']
/** Marks everything a cluster makes on the host's engine (a crashed run's leftovers are found by it). */
const CLUSTER_LABEL = 'agent-host.test-cluster'
const ENGINE_PORT = 2375

/** Remounts /sys and the cgroup hierarchies writable, then becomes dockerd. */
const ENTRY = `#!/bin/sh
set -e
mount -o remount,rw /sys
for d in /sys/fs/cgroup/*; do
  [ -L "$d" ] || mount -o remount,bind,rw "$d" "$d" 2>/dev/null || mount -o remount,rw "$d"
done
exec /usr/sbin/dockerd "$@"
`

export interface ClusterNode {
  /** The host's container that is this node. */
  container: string
  address: string
  engine: Docker
  nodeId: string
  manager: boolean
}

export interface SwarmCluster {
  name: string
  /** This host's address on the nodes' network (where a node reaches a server of the host). */
  gateway: string
  manager: Docker
  nodes: ClusterNode[]
  /** Its engine and every container on it die at once (SIGKILL to the node). */
  kill(node: ClusterNode): Promise<void>
  /** Starts the node again (same disk, same address) and waits until the swarm sees it ready. */
  revive(node: ClusterNode): Promise<void>
  /** `docker save` from the host's engine, `docker load` into every node. */
  loadImage(tag: string): Promise<void>
  /**
   * A framework's locally built image (its recipe, built on the host's engine
   * when missing there) in every node; answers its tag.
   */
  loadFrameworkImage(launch: ContainerLaunch, cacheDir?: string): Promise<string>
  /** Removes every node, its disk and the network: nothing of the cluster stays on the host. */
  teardown(): Promise<void>
  /** What of the cluster is still on the host's engine (containers, volumes, networks). */
  leftovers(): Promise<string[]>
}

/** Why no cluster can be made here (the tests skip), or undefined when one can. */
export async function clusterUnavailable(host = new Docker()): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'not root'
  const missing = [...BINARIES, XTABLES].filter((path) => !existsSync(path))
  if (missing.length > 0) return `no ${missing.join(', ')} on this host (Debian docker.io)`
  if (!BUSYBOX) return 'no BusyBox on this host (busybox-static)'
  const up = await host.ping().then(
    () => true,
    () => false
  )
  return up ? undefined : 'no Docker engine answers here'
}

function imageTag(): string {
  const hash = createHash('sha256')
  for (const path of [...BINARIES, BUSYBOX!]) {
    const info = statSync(path)
    hash.update(`${path}:${info.size}:${info.mtimeMs}\n`)
  }
  hash.update(ENTRY)
  return `agent-host/swarm-node:${hash.digest('hex').slice(0, 12)}`
}

async function copyWithLibraries(root: string, binary: string) {
  await mkdir(join(root, dirname(binary)), { recursive: true })
  await copyFile(realpathSync(binary), join(root, binary))
  await chmod(join(root, binary), 0o755)
  for (const library of await sharedLibraries(binary).catch(() => [])) {
    if (existsSync(join(root, library))) continue
    await mkdir(join(root, dirname(library)), { recursive: true })
    await copyFile(realpathSync(library), join(root, library))
  }
}

function tarOf(root: string) {
  return spawn('tar', ['-C', root, '--numeric-owner', '-c', '.'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  }).stdout
}

async function followDone(host: Docker, stream: NodeJS.ReadableStream) {
  await new Promise<void>((resolve, reject) =>
    host.modem.followProgress(stream, (error: Error | null, events: any[]) => {
      const failed = events?.find((event) => event?.error)
      if (error || failed) reject(error ?? new Error(String(failed.error)))
      else resolve()
    })
  )
}

/** The node image (built once per version of the host's engine, then reused). */
async function ensureNodeImage(host: Docker): Promise<string> {
  const tag = imageTag()
  if (
    await host
      .getImage(tag)
      .inspect()
      .then(Boolean, () => false)
  )
    return tag
  const root = await mkdtemp(join(tmpdir(), 'swarm-node-image-'))
  try {
    for (const dir of ['usr/bin', 'usr/sbin', 'usr/lib', 'usr/lib64', 'etc', 'var/lib', 'tmp']) {
      await mkdir(join(root, dir), { recursive: true })
    }
    for (const [link, target] of [
      ['bin', 'usr/bin'],
      ['sbin', 'usr/sbin'],
      ['lib', 'usr/lib'],
      ['lib64', 'usr/lib64'],
      ['var/run', '../run'],
    ]) {
      await symlink(target, join(root, link))
    }
    for (const binary of BINARIES) await copyWithLibraries(root, binary)
    await cp(XTABLES, join(root, XTABLES), { recursive: true })
    for (const module of await sharedLibraries(join(XTABLES, 'libxt_conntrack.so')).catch(
      () => []
    )) {
      if (!existsSync(join(root, module))) await copyWithLibraries(root, module)
    }
    for (const name of IPTABLES) await symlink('xtables-nft-multi', join(root, 'usr/sbin', name))
    await copyFile(realpathSync(BUSYBOX!), join(root, 'usr/bin/busybox'))
    await chmod(join(root, 'usr/bin/busybox'), 0o755)
    for (const applet of APPLETS) await symlink('busybox', join(root, 'usr/bin', applet))
    await writeFile(join(root, 'usr/bin/node-entry'), ENTRY, { mode: 0o755 })
    await writeFile(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n')
    await writeFile(join(root, 'etc/group'), 'root:x:0:\n')
    const [repo, version] = tag.split(':')
    await followDone(
      host,
      (await host.importImage(
        tarOf(root) as never,
        {
          repo,
          tag: version,
          changes: ['ENTRYPOINT ["/usr/bin/node-entry"]'],
        } as never
      )) as unknown as NodeJS.ReadableStream
    )
    return tag
  } finally {
    await rm(root, { recursive: true, force: true })
  }
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const found = await probe().catch(() => undefined)
    if (found !== undefined && found !== false) return found
    if (Date.now() > deadline) throw new Error(`swarm cluster: ${what} within ${timeoutMs} ms`)
    await sleep(250)
  }
}

/** A bridge network of the cluster's own on a free 10.231.x.0/24. */
async function createNetwork(host: Docker, name: string): Promise<string> {
  const first = createHash('sha256').update(name).digest()[0]
  for (let attempt = 0; attempt < 64; attempt++) {
    const subnet = `10.231.${(first + attempt * 7) % 250}`
    try {
      await host.createNetwork({
        Name: name,
        Driver: 'bridge',
        IPAM: { Config: [{ Subnet: `${subnet}.0/24`, Gateway: `${subnet}.1` }] },
        Labels: { [CLUSTER_LABEL]: name },
      })
      return subnet
    } catch (error) {
      if (!/overlap|already/i.test(String(error))) throw error
    }
  }
  throw new Error('swarm cluster: no free 10.231.x.0/24 for its network')
}

async function removeLeftovers(host: Docker, name: string) {
  const filters = { label: [`${CLUSTER_LABEL}=${name}`] }
  for (const container of await host.listContainers({ all: true, filters })) {
    await host
      .getContainer(container.Id)
      .remove({ force: true, v: true })
      .catch(() => {})
  }
  const { Volumes } = await host.listVolumes({ filters })
  for (const volume of Volumes ?? []) {
    await host
      .getVolume(volume.Name)
      .remove()
      .catch(() => {})
  }
  for (const network of await host.listNetworks({ filters })) {
    await host
      .getNetwork(network.Id)
      .remove()
      .catch(() => {})
  }
}

/**
 * Makes a swarm of `size` nodes named `<name>-node<i>`: node 1 is its only
 * manager, the others workers; every node is labelled with its engine's
 * address (what the swarm driver reaches task containers through). A
 * previous run's leftovers of the same name are removed first.
 */
export async function startSwarmCluster(options: {
  name: string
  size?: number
  /** The managers' heartbeat (how soon a silent node is declared down). Default: swarm's 5 s. */
  heartbeatMs?: number
  host?: Docker
}): Promise<SwarmCluster> {
  const host = options.host ?? new Docker()
  const name = options.name
  await removeLeftovers(host, name)
  const image = await ensureNodeImage(host)
  const subnet = await createNetwork(host, name)
  const nodes: ClusterNode[] = []
  for (let index = 1; index <= (options.size ?? 3); index++) {
    const container = `${name}-node${index}`
    const address = `${subnet}.${10 + index}`
    await host.createVolume({ Name: container, Labels: { [CLUSTER_LABEL]: name } })
    const created = await host.createContainer({
      name: container,
      Hostname: container,
      Image: image,
      Cmd: [
        '-H',
        'unix:///run/docker.sock',
        '-H',
        `tcp://0.0.0.0:${ENGINE_PORT}`,
        '--tls=false',
        `--cgroup-parent=/${container}`,
      ],
      Labels: { [CLUSTER_LABEL]: name },
      HostConfig: {
        CapAdd: ['ALL'],
        CapDrop: ['SYS_RESOURCE'],
        SecurityOpt: ['seccomp=unconfined', 'apparmor=unconfined'],
        // What `--security-opt systempaths=unconfined` sets: nothing of /proc masked or read-only.
        MaskedPaths: [],
        ReadonlyPaths: [],
        DeviceCgroupRules: ['a *:* rwm'],
        Tmpfs: { '/run': 'rw,exec' },
        Binds: [`${container}:/var/lib/docker`],
        NetworkMode: name,
      },
      NetworkingConfig: {
        EndpointsConfig: { [name]: { IPAMConfig: { IPv4Address: address } } },
      },
    })
    await created.start()
    nodes.push({
      container,
      address,
      engine: new Docker({ host: address, port: ENGINE_PORT, protocol: 'http' }),
      nodeId: '',
      manager: index === 1,
    })
  }
  await Promise.all(nodes.map((node) => until('engine up', 60_000, () => node.engine.ping())))
  const manager = nodes[0].engine
  await manager.swarmInit({
    ListenAddr: `0.0.0.0:2377`,
    AdvertiseAddr: nodes[0].address,
    Spec: options.heartbeatMs
      ? { Dispatcher: { HeartbeatPeriod: options.heartbeatMs * 1_000_000 } }
      : {},
  })
  const tokens = ((await manager.swarmInspect()) as any).JoinTokens
  for (const node of nodes.slice(1)) {
    await node.engine.swarmJoin({
      ListenAddr: '0.0.0.0:2377',
      AdvertiseAddr: node.address,
      RemoteAddrs: [`${nodes[0].address}:2377`],
      JoinToken: tokens.Worker,
    })
  }
  for (const node of nodes) {
    node.nodeId = ((await node.engine.info()) as any).Swarm.NodeID
    const current = (await manager.getNode(node.nodeId).inspect()) as any
    await manager.getNode(node.nodeId).update({
      version: current.Version.Index,
      ...current.Spec,
      Labels: { ...current.Spec.Labels, [ENGINE_LABEL]: `tcp://${node.address}:${ENGINE_PORT}` },
    })
  }
  const nodeReady = async (node: ClusterNode) =>
    ((await manager.getNode(node.nodeId).inspect()) as any).Status?.State === 'ready' || undefined
  await Promise.all(nodes.map((node) => until('node ready', 60_000, () => nodeReady(node))))

  const cluster: SwarmCluster = {
    name,
    gateway: `${subnet}.1`,
    manager,
    nodes,
    async kill(node) {
      await host.getContainer(node.container).kill()
      await host.getContainer(node.container).wait()
    },
    async revive(node) {
      await host.getContainer(node.container).start()
      await until('revived engine up', 60_000, () => node.engine.ping())
      await until('revived node ready', 90_000, () => nodeReady(node))
    },
    async loadImage(tag) {
      await Promise.all(
        nodes.map(async (node) => {
          const stream = await host.getImage(tag).get()
          await followDone(host, (await node.engine.loadImage(stream)) as NodeJS.ReadableStream)
        })
      )
    },
    async loadFrameworkImage(launch, cacheDir) {
      const images = new DockerImages(host, { images: 'local', cacheDir, log: () => {} })
      const resolved = await images.resolve(launch)
      await cluster.loadImage(resolved.image)
      return resolved.image
    },
    async teardown() {
      await removeLeftovers(host, name)
    },
    async leftovers() {
      const filters = { label: [`${CLUSTER_LABEL}=${name}`] }
      const containers = await host.listContainers({ all: true, filters })
      const { Volumes } = await host.listVolumes({ filters })
      const networks = await host.listNetworks({ filters })
      return [
        ...containers.map((item) => item.Names[0]),
        ...(Volumes ?? []).map((item) => item.Name),
        ...networks.map((item) => item.Name),
      ]
    },
  }
  return cluster
}
