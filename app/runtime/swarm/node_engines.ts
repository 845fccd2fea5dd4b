import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import Docker from 'dockerode'
import { LABELS } from '#runtime/docker/container_spec'
import { ignoreStatus } from '#runtime/docker/engine_calls'

/** The node label naming a node's own Engine API (`tcp://10.0.0.12:2376`, `https://...`). */
export const ENGINE_LABEL = 'agent-host.engine'

/** How long a node's engine may take to begin answering before the node counts as lost. */
const NODE_CALL_MS = 5000

/** A node's engine that did not answer in time (its node is probably lost). */
export class NodeSilent extends Error {}

/**
 * `call` with a signal that aborts its request when the node's engine has not
 * answered within NODE_CALL_MS (a lost node's address may swallow packets for
 * minutes). A stream already answering is not cut.
 */
export async function inTime<T>(
  what: string,
  call: (abortSignal: AbortSignal) => Promise<T>
): Promise<T> {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), NODE_CALL_MS)
  try {
    return await call(controller.signal)
  } catch (error) {
    if (controller.signal.aborted) throw new NodeSilent(`${what}: no answer in ${NODE_CALL_MS} ms`)
    throw error
  } finally {
    clearTimeout(timer)
  }
}

/** What the manager says of a node. */
export interface NodeView {
  id: string
  ready: boolean
  address: string | null
}

/**
 * A Docker client for `url` (`tcp://host:port`, `http://...`, `https://...`).
 * TLS (https, or tcp with DOCKER_TLS_VERIFY) takes its certificates from
 * DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem), as the docker CLI does.
 */
export function engineAt(url: string): Docker {
  const parsed = new URL(url)
  const tls = parsed.protocol === 'https:' || Boolean(process.env.DOCKER_TLS_VERIFY)
  const certs = process.env.DOCKER_CERT_PATH
  return new Docker({
    host: parsed.hostname,
    port: Number(parsed.port) || (tls ? 2376 : 2375),
    protocol: tls ? 'https' : 'http',
    ...(tls && certs
      ? {
          ca: readFileSync(join(certs, 'ca.pem')),
          cert: readFileSync(join(certs, 'cert.pem')),
          key: readFileSync(join(certs, 'key.pem')),
        }
      : {}),
  })
}

/**
 * Each swarm node's own Engine API. A swarm manager schedules services but
 * answers container calls (files, logs, usage, archives) only for its own
 * node: a task on another node is reached through that node's engine, named
 * by the node's `agent-host.engine` label (docs/runtime.md "Many machines").
 * The manager's own node is the manager's engine.
 */
export class NodeEngines {
  readonly #engines = new Map<string, { url: string; engine: Docker }>()
  #ownNodeId?: Promise<string | undefined>

  constructor(private readonly manager: Docker) {}

  async #managerNodeId(): Promise<string | undefined> {
    this.#ownNodeId ??= this.manager
      .info()
      .then((info: { Swarm?: { NodeID?: string } }) => info.Swarm?.NodeID || undefined)
      .catch((error) => {
        this.#ownNodeId = undefined
        throw error
      })
    return this.#ownNodeId
  }

  /** The node as the manager sees it, or undefined when the swarm has no such node. */
  async node(nodeId: string): Promise<(NodeView & { engineUrl?: string }) | undefined> {
    const node = (await ignoreStatus(this.manager.getNode(nodeId).inspect(), 404)) as any
    if (!node) return undefined
    const address = node.Status?.Addr
    return {
      id: nodeId,
      ready: node.Status?.State === 'ready',
      address: address && address !== '0.0.0.0' ? address : null,
      engineUrl: node.Spec?.Labels?.[ENGINE_LABEL],
    }
  }

  /** Every node of the swarm. */
  async nodes(): Promise<NodeView[]> {
    const nodes = (await this.manager.listNodes()) as any[]
    return nodes.map((node) => ({
      id: node.ID,
      ready: node.Status?.State === 'ready',
      address: node.Status?.Addr && node.Status.Addr !== '0.0.0.0' ? node.Status.Addr : null,
    }))
  }

  /** The engine of `nodeId`; throws when the node is unknown or names no engine. */
  async engineOf(nodeId: string): Promise<Docker> {
    if (nodeId === (await this.#managerNodeId())) return this.manager
    const node = await this.node(nodeId)
    if (!node) throw new Error(`swarm node ${nodeId} is gone`)
    if (!node.engineUrl) {
      throw new Error(
        `swarm node ${nodeId} has no ${ENGINE_LABEL} label: docker node update --label-add ${ENGINE_LABEL}=tcp://<address>:2376 ${nodeId}`
      )
    }
    const known = this.#engines.get(nodeId)
    if (known?.url === node.engineUrl) return known.engine
    const engine = engineAt(node.engineUrl)
    this.#engines.set(nodeId, { url: node.engineUrl, engine })
    return engine
  }

  /** The engines of the nodes the manager calls ready and that answer now. */
  async answeringEngines(): Promise<Docker[]> {
    const engines: Docker[] = []
    for (const node of await this.nodes()) {
      if (!node.ready) continue
      const engine = await this.engineOf(node.id).catch(() => undefined)
      if (!engine) continue
      const ping = (abortSignal: AbortSignal) =>
        engine.ping({ abortSignal } as never) as unknown as Promise<unknown>
      if (
        await inTime('ping', ping).then(
          () => true,
          () => false
        )
      )
        engines.push(engine)
    }
    return engines
  }

  /** Every answering node's containers and volumes of the agent (a lost node's go when it is back). */
  async removeAgent(agentId: string): Promise<void> {
    const label = `${LABELS.agentId}=${agentId}`
    for (const engine of await this.answeringEngines()) {
      const containers = await engine.listContainers({ all: true, filters: { label: [label] } })
      for (const container of containers) {
        await ignoreStatus(engine.getContainer(container.Id).remove({ force: true }), 404, 409)
      }
      const { Volumes } = await engine.listVolumes({ filters: { label: [label] } })
      for (const volume of Volumes ?? []) await removeVolume(engine, volume.Name)
    }
  }
}

/** Removes a volume and the ended containers that hold it (running ones keep it). */
export async function removeVolume(engine: Docker, name: string) {
  const holders = await engine.listContainers({ all: true, filters: { volume: [name] } })
  for (const holder of holders) {
    if (holder.State === 'running' || holder.State === 'paused') return
    await ignoreStatus(engine.getContainer(holder.Id).remove({ force: true }), 404, 409)
  }
  await ignoreStatus(engine.getVolume(name).remove(), 404, 409)
}
