import { existsSync } from 'node:fs'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join, posix } from 'node:path'
import Docker from 'dockerode'
import { AgentNotRunningException, NotFoundException } from '#core/exceptions/api_exceptions'
import type {
  AgentFileReader,
  ContainerLaunch,
  FrameworkPlugin,
  LocalImageRecipe,
  RenderedFile,
} from '#plugins/types'
import { agentPaths, removeAgentFolders } from '#runtime/agent_paths'
import { buildContainerSpec, dockerNames, LABELS } from '#runtime/docker/container_spec'
import {
  DockerAgentReader,
  DockerWorkspaceFiles,
  statInContainer,
} from '#runtime/docker/docker_files'
import { AgentNetworkGuard } from '#runtime/docker/agent_network'
import {
  buildLocalImage,
  IMAGE_USER,
  localImageTag,
  type StagedPackage,
  type StagedPythonEnvironment,
} from '#runtime/docker/local_images'
import { disableIoUringForUnprivileged, ioUringDisabledLevel } from '#runtime/io_uring_sysctl'
import { PackageCache } from '#runtime/package_cache'
import { PythonPackageCache } from '#runtime/python_cache'
import { DockerStreamDemuxer, LineSplitter, demuxDockerLogs } from '#runtime/docker/docker_streams'
import { createTar, type TarEntry } from '#runtime/files/tar'
import { resolveWorkspacePath } from '#runtime/files/workspace_path'
import { renderedSkillFiles, skillFolder } from '#runtime/skill_files'
import type {
  ContainerDriver,
  ContainerInfo,
  ContainerUsage,
  CreateRequest,
  DriverName,
  RuntimeEvent,
  RuntimeEventListener,
  SkillChange,
  WorkspaceFiles,
} from '#runtime/types'

export interface DockerDriverOptions {
  /** `<storage>/agents`: the driver keeps a small record per agent there. */
  agentsDir: string
  /** Engine client; default: DOCKER_HOST or the local socket. */
  docker?: Docker
  /** Seconds Docker waits between SIGTERM and SIGKILL, in ms. Default 10 s. */
  stopGraceMs?: number
  /** Crash restarts Docker makes before the container stays down (`error`). Default 5. */
  maxRestarts?: number
  /** How often running agents are inspected for restarts and failures. Default 5 s. */
  pollIntervalMs?: number
  log?: (message: string, detail?: Record<string, unknown>) => void
  /**
   * AGENT_IMAGES: `auto` (default: the official image, pulled when missing;
   * built locally from the plugin's recipe when the pull fails), `registry`
   * (never build), `local` (always the locally built image).
   */
  images?: ImageSource
  /** `<storage>/runtime`: the npm cache local images take framework packages from. */
  cacheDir?: string
}

export type ImageSource = 'auto' | 'registry' | 'local'

/** What the driver remembers of an agent between calls (runtime/docker.json). */
export interface DockerRecord {
  framework: string
  statePath: string
  workspacePath: string
  containerPort: number
  owner: { uid: number; gid: number }
  /** Stopped on purpose: an exited container is `stopped`, not `error`. */
  stoppedByUser: boolean
}

function statusOf(error: unknown): number | undefined {
  return (error as { statusCode?: number } | undefined)?.statusCode
}

export async function ignoreStatus<T>(
  work: Promise<T>,
  ...statuses: number[]
): Promise<T | undefined> {
  try {
    return await work
  } catch (error) {
    if (statuses.includes(statusOf(error) ?? 0)) return undefined
    throw error
  }
}

export function parseOwner(user: string | undefined): { uid: number; gid: number } {
  const [uid, gid] = (user ?? '').split(':').map(Number)
  return {
    uid: Number.isInteger(uid) ? uid : 0,
    gid: Number.isInteger(gid) ? gid : Number.isInteger(uid) ? uid : 0,
  }
}

/** CPU percent (of one core) and memory from one `GET /containers/{id}/stats?stream=false`. */
export function usageFromDockerStats(stats: any, memoryLimitBytes?: number): ContainerUsage {
  const cpuDelta =
    (stats?.cpu_stats?.cpu_usage?.total_usage ?? 0) -
    (stats?.precpu_stats?.cpu_usage?.total_usage ?? 0)
  const systemDelta =
    (stats?.cpu_stats?.system_cpu_usage ?? 0) - (stats?.precpu_stats?.system_cpu_usage ?? 0)
  const onlineCpus =
    stats?.cpu_stats?.online_cpus ?? stats?.cpu_stats?.cpu_usage?.percpu_usage?.length ?? 1
  const cpuPercent =
    systemDelta > 0 && cpuDelta > 0 ? (cpuDelta / systemDelta) * onlineCpus * 100 : 0
  const memory = stats?.memory_stats ?? {}
  // Page cache is reclaimable: `docker stats` leaves it out too.
  const cache =
    memory.stats?.inactive_file ?? memory.stats?.total_inactive_file ?? memory.stats?.cache ?? 0
  const usedBytes = Math.max(0, (memory.usage ?? 0) - cache)
  const limitBytes = memoryLimitBytes || memory.limit || 0
  return {
    cpuPercent: Math.round(cpuPercent * 10) / 10,
    memoryMb: Math.round((usedBytes / 1024 / 1024) * 10) / 10,
    memoryLimitMb: Math.round(limitBytes / 1024 / 1024),
  }
}

/** Archive entries for rendered files, relative to the state mount (parents included). */
export function renderedFilesArchive(
  files: RenderedFile[],
  paths: { state: string; workspace: string },
  owner: { uid: number; gid: number }
): Buffer {
  const workspaceInState = posix.relative(paths.state, paths.workspace)
  if (workspaceInState.startsWith('..')) {
    throw new Error('The docker driver needs the workspace inside the state volume')
  }
  const entries = new Map<string, TarEntry>()
  for (const file of files) {
    const checked = resolveWorkspacePath(file.path)
    const relative =
      file.root === 'state' ? checked.relative : posix.join(workspaceInState, checked.relative)
    const segments = relative.split('/')
    for (let index = 1; index < segments.length; index++) {
      const dir = segments.slice(0, index).join('/')
      if (!entries.has(dir))
        entries.set(dir, { name: dir, type: 'directory', mode: 0o755, ...owner })
    }
    entries.set(relative, {
      name: relative,
      type: 'file',
      content: Buffer.from(file.content, 'utf8'),
      mode: file.mode ?? 0o644,
      ...owner,
    })
  }
  return createTar([...entries.values()])
}

/**
 * The `docker` driver: one container per agent from the framework's pinned
 * image, through the Engine API (DOCKER_HOST or /var/run/docker.sock). The
 * container, its state volume and its network are named after the agent
 * (`agent-host-<id>`) and labelled; see buildContainerSpec for the limits
 * and hardening. Docker restarts crashed containers (on-failure, bounded);
 * this driver polls them for restarts and failures to emit events.
 */
export class DockerDriver implements ContainerDriver {
  readonly name: DriverName = 'docker'
  readonly #docker: Docker
  readonly #listeners = new Set<RuntimeEventListener>()
  readonly #watched = new Map<string, { restartCount: number; failed: boolean }>()
  #poller?: NodeJS.Timeout

  readonly #network: AgentNetworkGuard

  constructor(protected readonly options: DockerDriverOptions) {
    this.#docker = options.docker ?? new Docker()
    this.#network = new AgentNetworkGuard(this.#docker, (message) => this.log(message))
  }

  /** The Engine API client (for drivers built on this one). */
  protected get engine(): Docker {
    return this.#docker
  }

  protected unwatch(agentId: string) {
    this.#watched.delete(agentId)
  }

  protected log(message: string, detail?: Record<string, unknown>) {
    this.options.log?.(message, detail)
  }

  protected emit(event: RuntimeEvent) {
    for (const listener of this.#listeners) {
      try {
        listener(event)
      } catch (error) {
        this.log(`runtime event listener failed: ${(error as Error).message}`)
      }
    }
  }

  onEvent(listener: RuntimeEventListener): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  #recordFile(agentId: string) {
    return join(agentPaths(this.options.agentsDir, agentId).runtime, 'docker.json')
  }

  protected async readRecord(agentId: string): Promise<DockerRecord | undefined> {
    try {
      return JSON.parse(await readFile(this.#recordFile(agentId), 'utf8')) as DockerRecord
    } catch {
      return undefined
    }
  }

  protected async writeRecord(agentId: string, record: DockerRecord) {
    const file = this.#recordFile(agentId)
    await mkdir(join(file, '..'), { recursive: true, mode: 0o700 })
    await writeFile(file, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 })
  }

  /** The agent's container (it may not exist: calls on it then fail with 404). */
  protected async containerOf(agentId: string): Promise<Docker.Container> {
    return this.#docker.getContainer(dockerNames(agentId).container)
  }

  async #inspectContainer(agentId: string): Promise<Docker.ContainerInspectInfo | undefined> {
    const container = await this.containerOf(agentId)
    return ignoreStatus(container.inspect(), 404)
  }

  async #hasImage(image: string) {
    return Boolean(await ignoreStatus(this.#docker.getImage(image).inspect(), 404))
  }

  /** The launch to run: the official image, or the locally built one when it cannot be pulled. */
  protected async resolveImage(launch: ContainerLaunch): Promise<ContainerLaunch> {
    const source = this.options.images ?? 'auto'
    const recipe = launch.localImage
    if (source !== 'local' || !recipe) {
      if (await this.#hasImage(launch.image)) return launch
      try {
        await this.#pull(launch.image)
        return launch
      } catch (error) {
        if (source === 'registry' || !recipe) throw error
        this.log(`could not pull ${launch.image} (${(error as Error).message}); building locally`)
      }
    }
    const tag = localImageTag(recipe)
    if (!(await this.#hasImage(tag))) await this.#build(recipe)
    return { ...launch, image: tag, command: recipe.command, user: IMAGE_USER }
  }

  #ioUringRefused?: Promise<void>

  /**
   * Docker's default seccomp profile allows io_uring before engine 25.0
   * (a large kernel attack surface): on such a local engine, as root, the
   * service sets kernel.io_uring_disabled=1 as the unshare sandbox does
   * (app/runtime/io_uring_sysctl.ts), so containers (no CAP_SYS_ADMIN) are
   * refused it; where it cannot, the log says io_uring stays open to them.
   */
  #refuseIoUring(): Promise<void> {
    this.#ioUringRefused ??= (async () => {
      const { Version } = await this.#docker.version()
      if (!(Number(/^(\d+)\./.exec(Version ?? '')?.[1]) < 25)) return
      const open = `Docker ${Version}'s default seccomp profile allows io_uring in containers`
      const remote = process.env.DOCKER_HOST && !process.env.DOCKER_HOST.startsWith('unix://')
      if (remote) {
        this.log(`WARNING: ${open}; set kernel.io_uring_disabled=1 on the engine's host`)
        return
      }
      if (process.getuid?.() !== 0 || ioUringDisabledLevel() === undefined) {
        if ((ioUringDisabledLevel() ?? 0) < 1) {
          this.log(`WARNING: ${open} and kernel.io_uring_disabled cannot be set here`)
        }
        return
      }
      if (disableIoUringForUnprivileged('the docker driver')) {
        this.log(
          `set kernel.io_uring_disabled=1: ${open}; io_uring now needs CAP_SYS_ADMIN on this host, which containers never have`
        )
      }
    })().catch((error) => {
      this.#ioUringRefused = undefined
      throw error
    })
    return this.#ioUringRefused
  }

  /** One build per tag at a time (concurrent starts of one framework share it). */
  readonly #builds = new Map<string, Promise<void>>()

  #build(recipe: LocalImageRecipe): Promise<void> {
    const tag = localImageTag(recipe)
    let pending = this.#builds.get(tag)
    if (!pending) {
      pending = (async () => {
        this.log(`building ${tag} locally`)
        const packages: StagedPackage[] = []
        const installed: Array<{ name: string; packageDir: string }> = []
        for (const { name, version } of recipe.npmPackages ?? []) {
          if (!this.options.cacheDir) throw new Error(`${recipe.tag} needs the runtime npm cache`)
          const cache = new PackageCache({
            cacheDir: this.options.cacheDir,
            log: (message) => this.log(message),
          })
          const { packageDir } = await cache.ensure(name, version)
          packages.push({ name, hostRoot: cache.location(name, version).root })
          installed.push({ name, packageDir })
        }
        await recipe.prepare?.(installed)
        let python: StagedPythonEnvironment | undefined
        if (recipe.pythonEnvironment) {
          if (!this.options.cacheDir) throw new Error(`${recipe.tag} needs the runtime cache`)
          const { name, requirements } = recipe.pythonEnvironment
          const { venvDir } = await new PythonPackageCache({
            cacheDir: this.options.cacheDir,
            log: (message) => this.log(message),
          }).ensure(name, requirements)
          python = { name, venvDir }
        }
        await buildLocalImage(this.#docker, recipe, {
          packages,
          python,
          log: (message) => this.log(message),
        })
        this.log(`built ${tag}`)
      })().finally(() => this.#builds.delete(tag))
      this.#builds.set(tag, pending)
    }
    return pending
  }

  async #pull(image: string) {
    this.log(`pulling ${image}`)
    const stream = await this.#docker.pull(image)
    let last = 0
    await new Promise<void>((resolve, reject) => {
      this.#docker.modem.followProgress(
        stream,
        (error: Error | null) => (error ? reject(error) : resolve()),
        (event: { status?: string; progress?: string; id?: string }) => {
          if (Date.now() - last < 3000) return
          last = Date.now()
          this.log(
            `pulling ${image}: ${event.status ?? ''} ${event.id ?? ''} ${event.progress ?? ''}`.trim()
          )
        }
      )
    })
    this.log(`pulled ${image}`)
  }

  async #ensureNetwork(agentId: string) {
    const name = dockerNames(agentId).network
    if (await ignoreStatus(this.#docker.getNetwork(name).inspect(), 404)) {
      // Rules live in the kernel, not the engine: renewed on every start (after a reboot too).
      await this.#network.confine(agentId)
      return
    }
    await ignoreStatus(
      this.#docker.createNetwork({
        Name: name,
        Driver: 'bridge',
        Options: this.#network.networkOptions(agentId),
        Labels: { [LABELS.managed]: 'true', [LABELS.agentId]: agentId },
      }),
      409
    )
    await this.#network.confine(agentId)
  }

  protected async ensureVolume(agentId: string) {
    const name = dockerNames(agentId).volume
    if (await ignoreStatus(this.#docker.getVolume(name).inspect(), 404)) return
    await this.#docker.createVolume({
      Name: name,
      Labels: { [LABELS.managed]: 'true', [LABELS.agentId]: agentId },
    })
  }

  async create({ spec, plugin, gatewayToken, containerId }: CreateRequest): Promise<ContainerInfo> {
    const agentId = spec.agentId
    await mkdir(agentPaths(this.options.agentsDir, agentId).runtime, {
      recursive: true,
      mode: 0o700,
    })
    const current = await this.#inspectContainer(agentId)
    // The service's loopback is not the container's: agents reach the model proxy through a relay.
    const proxy = await this.#network.modelProxyFor(spec.modelProxy.baseUrl)
    const context = {
      agentId,
      config: spec.config,
      modelProxy: { ...spec.modelProxy, baseUrl: proxy.baseUrl },
      driver: 'docker' as const,
      port: plugin.defaultPort,
      gatewayToken,
      paths: plugin.containerPaths,
    }
    const record = (user: string | undefined): DockerRecord => ({
      framework: plugin.name,
      statePath: plugin.containerPaths.state,
      workspacePath: plugin.containerPaths.workspace,
      containerPort: plugin.defaultPort,
      owner: parseOwner(user),
      stoppedByUser: true,
    })

    if (current?.State.Running) {
      // A container from before the service restarted: adopt it as it is.
      const adopted = record(current.Config.User)
      await this.writeRecord(agentId, { ...adopted, stoppedByUser: false })
      this.watch(agentId, current.RestartCount)
      return this.#info(agentId, current, adopted)
    }
    if (current) {
      const previous = await this.containerOf(agentId)
      await previous.remove({ force: true })
    }

    await this.#refuseIoUring()
    const launch = await this.resolveImage(plugin.containerLaunch(context))
    const created = record(launch.user)
    await this.#ensureNetwork(agentId)
    await this.ensureVolume(agentId)
    const container = await this.#docker.createContainer(
      buildContainerSpec({
        agentId,
        framework: plugin.name,
        launch,
        containerPort: plugin.defaultPort,
        statePath: plugin.containerPaths.state,
        resources: { ...plugin.resources, ...spec.resources },
        maxRestarts: this.options.maxRestarts ?? 5,
        extraHosts: proxy.extraHosts,
        runId: containerId,
      })
    )
    const files: RenderedFile[] = []
    for (const file of [
      ...(await plugin.renderFiles(context)),
      ...renderedSkillFiles(plugin, spec.skills),
    ]) {
      if (file.onlyIfMissing) {
        const base = file.root === 'state' ? created.statePath : created.workspacePath
        if (await statInContainer(container, posix.join(base, file.path))) continue
      }
      files.push(file)
    }
    await container.putArchive(renderedFilesArchive(files, plugin.containerPaths, created.owner), {
      path: created.statePath,
    })
    await this.writeRecord(agentId, created)
    return this.inspect(agentId)
  }

  async start(agentId: string): Promise<ContainerInfo> {
    const record = await this.readRecord(agentId)
    if (!record || !(await this.#inspectContainer(agentId))) {
      throw new NotFoundException(`Agent ${agentId} has no container`)
    }
    const container = await this.containerOf(agentId)
    await ignoreStatus(container.start(), 304)
    await this.writeRecord(agentId, { ...record, stoppedByUser: false })
    const info = await this.inspect(agentId)
    if (info.containerId) {
      this.emit({ type: 'started', agentId, containerId: info.containerId, at: new Date() })
    }
    this.watch(agentId, info.restartCount)
    return info
  }

  async stop(agentId: string): Promise<void> {
    const record = await this.readRecord(agentId)
    if (record) await this.writeRecord(agentId, { ...record, stoppedByUser: true })
    this.#watched.delete(agentId)
    const current = await this.#inspectContainer(agentId)
    if (!current) return
    const container = await this.containerOf(agentId)
    await ignoreStatus(
      container.stop({ t: Math.ceil((this.options.stopGraceMs ?? 10_000) / 1000) }),
      304,
      404
    )
    if (current.State.Running) this.emit({ type: 'stopped', agentId, at: new Date() })
  }

  async remove(agentId: string): Promise<void> {
    await this.stop(agentId)
    const names = dockerNames(agentId)
    const container = await this.containerOf(agentId)
    await ignoreStatus(container.remove({ force: true }), 404)
    await ignoreStatus(this.#docker.getVolume(names.volume).remove(), 404)
    await ignoreStatus(this.#docker.getNetwork(names.network).remove(), 404)
    await this.#network.release(agentId)
    await removeAgentFolders(agentPaths(this.options.agentsDir, agentId))
  }

  #info(
    agentId: string,
    container: Docker.ContainerInspectInfo,
    record: DockerRecord | undefined
  ): ContainerInfo {
    const state = container.State
    let status: ContainerInfo['state']
    if (state.Restarting) status = 'restarting'
    else if (state.Running) status = 'running'
    else if (state.Status === 'created' || record?.stoppedByUser !== false) status = 'stopped'
    else status = state.ExitCode === 0 ? 'stopped' : 'error'
    const port =
      record?.containerPort ??
      Number(Object.keys(container.Config.ExposedPorts ?? {})[0]?.split('/')[0])
    const binding = container.NetworkSettings?.Ports?.[`${port}/tcp`]?.[0]
    const live = status === 'running'
    return {
      agentId,
      driver: 'docker',
      state: status,
      // The id the API answered when this run was scheduled, where it was.
      containerId: container.Config.Labels?.[LABELS.runId] ?? container.Id,
      framework: container.Config.Labels?.[LABELS.framework] ?? record?.framework ?? null,
      baseUrl: live && binding?.HostPort ? `http://127.0.0.1:${binding.HostPort}` : null,
      startedAt: live && state.StartedAt ? new Date(state.StartedAt) : null,
      restartCount: container.RestartCount ?? 0,
      lastError:
        state.Error ||
        (!state.Running && state.ExitCode ? `exited with code ${state.ExitCode}` : null) ||
        (state.OOMKilled ? 'killed: out of memory' : null),
    }
  }

  async inspect(agentId: string): Promise<ContainerInfo> {
    const [container, record] = await Promise.all([
      this.#inspectContainer(agentId),
      this.readRecord(agentId),
    ])
    if (container) return this.#info(agentId, container, record)
    return {
      agentId,
      driver: 'docker',
      state: existsSync(agentPaths(this.options.agentsDir, agentId).runtime) ? 'stopped' : 'absent',
      containerId: null,
      framework: record?.framework ?? null,
      baseUrl: null,
      startedAt: null,
      restartCount: 0,
      lastError: null,
    }
  }

  async usage(agentId: string): Promise<ContainerUsage> {
    const inspected = await this.#inspectContainer(agentId)
    if (!inspected?.State.Running) throw new AgentNotRunningException()
    const container = await this.containerOf(agentId)
    const stats = await container.stats({ stream: false })
    return usageFromDockerStats(stats, inspected.HostConfig.Memory ?? undefined)
  }

  async logs(agentId: string, tail: number): Promise<string[]> {
    if (!(await this.#inspectContainer(agentId))) return []
    const container = await this.containerOf(agentId)
    const raw = (await container.logs({
      stdout: true,
      stderr: true,
      follow: false,
      tail,
    })) as unknown as Buffer
    const lines = demuxDockerLogs(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw))).split('\n')
    if (lines.at(-1) === '') lines.pop()
    return lines.slice(-tail)
  }

  async *followLogs(agentId: string, options: { tail?: number; signal?: AbortSignal }) {
    const container = await this.containerOf(agentId)
    const stream = (await container.logs({
      stdout: true,
      stderr: true,
      follow: true,
      tail: options.tail ?? 0,
    })) as unknown as NodeJS.ReadableStream & { destroy(): void }
    const stop = () => stream.destroy()
    options.signal?.addEventListener('abort', stop, { once: true })
    const demuxer = new DockerStreamDemuxer()
    const lines = new LineSplitter()
    try {
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        for (const line of lines.push(demuxer.push(chunk))) yield line
        if (options.signal?.aborted) return
      }
      for (const line of lines.flush()) yield line
    } catch (error) {
      if (!options.signal?.aborted) throw error
    } finally {
      options.signal?.removeEventListener('abort', stop)
      stream.destroy()
    }
  }

  #requireRecord(record: DockerRecord | undefined, agentId: string): DockerRecord {
    if (!record) throw new NotFoundException(`Agent ${agentId} has no container`)
    return record
  }

  /** Record and container are looked up on first use: files() and reader() stay synchronous. */
  #lazy<T extends object>(
    agentId: string,
    make: (container: Docker.Container, record: DockerRecord) => T
  ) {
    let loaded: Promise<T> | undefined
    return () =>
      (loaded ??= Promise.all([this.containerOf(agentId), this.readRecord(agentId)]).then(
        ([container, found]) => make(container, this.#requireRecord(found, agentId))
      ))
  }

  files(agentId: string): WorkspaceFiles {
    const load = this.#lazy(
      agentId,
      (container, record) =>
        new DockerWorkspaceFiles(container, record.workspacePath, [record.statePath], record.owner)
    )
    return {
      list: (path) => load().then((files) => files.list(path)),
      read: (path) => load().then((files) => files.read(path)),
      write: (path, content) => load().then((files) => files.write(path, content)),
      delete: (path) => load().then((files) => files.delete(path)),
    }
  }

  async syncSkills(agentId: string, plugin: FrameworkPlugin, change: SkillChange): Promise<void> {
    const record = await this.readRecord(agentId)
    const current = await this.#inspectContainer(agentId)
    // No container yet: the skills are rendered when it is created.
    if (!record || !current) return
    const container = await this.containerOf(agentId)
    const files = renderedSkillFiles(plugin, change.write)
    if (files.length > 0) {
      await container.putArchive(renderedFilesArchive(files, plugin.containerPaths, record.owner), {
        path: record.statePath,
      })
    }
    // Removing needs a running container (exec); a stopped one keeps the folder until then.
    if (change.remove.length === 0 || !current.State.Running) return
    const base =
      plugin.skillsDir?.root === 'state'
        ? plugin.containerPaths.state
        : plugin.containerPaths.workspace
    const exec = await container.exec({
      Cmd: [
        'rm',
        '-rf',
        '--',
        ...change.remove.map((id) => posix.join(base, skillFolder(plugin, id))),
      ],
      AttachStdout: true,
      AttachStderr: true,
    })
    const stream = await exec.start({ hijack: true, stdin: false })
    stream.resume()
    await new Promise((resolve) => stream.once('end', resolve).once('close', resolve))
  }

  reader(agentId: string): AgentFileReader {
    const load = this.#lazy(
      agentId,
      (container, record) =>
        new DockerAgentReader(container, {
          state: record.statePath,
          workspace: record.workspacePath,
        })
    )
    return {
      readText: (root, path) => load().then((reader) => reader.readText(root, path)),
      list: (root, path) => load().then((reader) => reader.list(root, path)),
    }
  }

  protected watch(agentId: string, restartCount: number) {
    this.#watched.set(agentId, { restartCount, failed: false })
    if (this.#poller) return
    this.#poller = setInterval(() => void this.#poll(), this.options.pollIntervalMs ?? 5000)
    this.#poller.unref()
  }

  async #poll() {
    for (const [agentId, seen] of this.#watched) {
      try {
        const info = await this.inspect(agentId)
        if (info.restartCount > seen.restartCount) {
          seen.restartCount = info.restartCount
          this.emit({
            type: 'restarting',
            agentId,
            restartCount: info.restartCount,
            delayMs: 0,
            at: new Date(),
          })
        }
        if (info.state === 'error' && !seen.failed) {
          seen.failed = true
          this.emit({
            type: 'error',
            agentId,
            message: `container ${info.lastError ?? 'failed'}; Docker gave up restarting it`,
            restartCount: info.restartCount,
            at: new Date(),
          })
        }
      } catch (error) {
        this.log(`docker poll of ${agentId} failed: ${(error as Error).message}`)
      }
    }
  }

  async sweep(keepAgentIds: string[]): Promise<string[]> {
    const keep = new Set(keepAgentIds)
    const containers = await this.#docker.listContainers({
      all: true,
      filters: { label: [`${LABELS.managed}=true`] },
    })
    const stopped: string[] = []
    for (const container of containers) {
      const agentId = container.Labels?.[LABELS.agentId]
      if (!agentId || keep.has(agentId)) continue
      if (container.State === 'running' || container.State === 'restarting') {
        await this.stop(agentId)
        stopped.push(agentId)
      }
    }
    return stopped
  }

  async close(): Promise<void> {
    await this.#network.close()
    if (this.#poller) clearInterval(this.#poller)
    this.#poller = undefined
    this.#watched.clear()
  }
}

/** True when an engine is reachable by configuration (DOCKER_HOST or the default socket). */
export function dockerConfigured(): boolean {
  return Boolean(process.env.DOCKER_HOST) || existsSync('/var/run/docker.sock')
}
