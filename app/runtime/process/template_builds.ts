import { randomBytes, randomUUID } from 'node:crypto'
import type { FrameworkPlugin } from '#plugins/types'
import { agentPaths } from '#runtime/agent_paths'
import { chatOnce } from '#runtime/chat_client'
import { warmUpRequest } from '#runtime/warm_up'
import type { CreateRequest } from '#runtime/types'
import type { AgentProcess } from '#runtime/process/agent_process'
import { AgentCheckpoint } from '#runtime/process/checkpoint'
import { agentUid } from '#runtime/process/sandbox'
import type { TemplateStore } from '#runtime/process/template'
import { answers, settles } from '#runtime/process/template_waits'

/** How long a template's framework may take to answer its readiness path. */
const TEMPLATE_BOOT_TIMEOUT_MS = 180_000

/** A random string as long as `value`, of letters and digits (a stand-in for a token). */
function randomLike(value: string): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
  return [...randomBytes(value.length)].map((byte) => alphabet[byte % alphabet.length]).join('')
}

/**
 * What building a template needs of the process driver: one run of the
 * framework under an id of its own, prepared, started, checkpointed and
 * removed like an agent's.
 */
export interface TemplateRuns {
  /** Prepares the run like an agent's create, as the template `key`'s (under the agent's lock). */
  create(request: CreateRequest, key: string): Promise<unknown>
  start(agentId: string): Promise<unknown>
  /** The run's supervised process (after create). */
  agent(agentId: string): AgentProcess
  /** Checkpoints the run, uncompressed (under the agent's lock); false when it could not. */
  hibernate(agentId: string): Promise<boolean>
  /** Removes the run's process, folders and network namespace. */
  remove(agentId: string): Promise<void>
  /**
   * Model calls made with `modelProxy.token` answered on this host, never
   * forwarded, until the returned function is called; undefined when they
   * cannot be.
   */
  answerModelCallsOf(modelProxy: CreateRequest['spec']['modelProxy']): (() => void) | undefined
}

export interface TemplateBuildsOptions {
  /** `<storage>/agents`: one folder per agent. */
  agentsDir: string
  store: TemplateStore
  runs: TemplateRuns
  /** True once the service is stopping: no template is built any more. */
  stopping: () => boolean
  log: (message: string) => void
}

/**
 * The builds of templates (docs/runtime.md "New agents from a template"):
 * one framework run per template, in the background, once at a time per
 * key; its events are nobody's.
 */
export class TemplateBuilds {
  /** Templates being built, by key. */
  readonly #builds = new Map<string, Promise<void>>()
  /** The ids the builds run their framework under, with each launch's fingerprint. */
  readonly #runs = new Map<string, string | undefined>()

  constructor(private readonly options: TemplateBuildsOptions) {}

  /** True for the id a template build runs its framework under. */
  isTemplateRun(agentId: string): boolean {
    return this.#runs.has(agentId)
  }

  /** A build's run just prepared, with its launch's fingerprint. */
  registerRun(agentId: string, fingerprint: string | undefined) {
    this.#runs.set(agentId, fingerprint)
  }

  /** The build of `key` under way, if any. */
  building(key: string): Promise<void> | undefined {
    return this.#builds.get(key)
  }

  /** Until the templates being built now are built (or failed). */
  async whenBuilt(): Promise<void> {
    await Promise.allSettled([...this.#builds.values()])
  }

  /**
   * The template's framework gets the private warm-up turn (warm_up.ts) an
   * agent gets before its first checkpoint, so that no agent started from
   * it pays the framework's one-time first-turn work (OpenClaw: ~8 s of
   * CPU). Throws when the turn failed.
   */
  async #warmUp(
    plugin: FrameworkPlugin,
    templateId: string,
    gatewayToken: string,
    agent: AgentProcess
  ): Promise<void> {
    const endpoint = plugin.chatEndpoint({ agentId: templateId, gatewayToken })
    const target = {
      url: `http://${agent.host}:${agent.port}${endpoint.path}`,
      headers: endpoint.headers,
      model: endpoint.model,
    }
    await chatOnce(target, warmUpRequest(AbortSignal.timeout(TEMPLATE_BOOT_TIMEOUT_MS)))
  }

  /**
   * Builds the template `key` in the background, once at a time per key;
   * `discardFirst`: the one there is goes first (new agents boot meanwhile).
   */
  soon(
    key: string,
    spec: CreateRequest['spec'],
    plugin: FrameworkPlugin,
    shape: Record<string, unknown>,
    options: { discardFirst?: boolean } = {}
  ) {
    if (this.#builds.has(key) || this.options.stopping()) return
    const discarded = options.discardFirst ? this.options.store.discard(key) : Promise.resolve()
    const build = discarded
      .then(() => this.#build(key, spec, plugin, shape))
      .catch((error) =>
        this.options.log(`${plugin.name} template could not be built: ${(error as Error).message}`)
      )
      .finally(() => this.#builds.delete(key))
    this.#builds.set(key, build)
  }

  /**
   * Boots the framework once from the shape alone (no secret, no
   * personality: a model proxy token and a gateway token of its own, both
   * worthless), under an id and uid of its own, in the fixed layout; once it
   * answers its readiness path, dumps it (uncompressed: it is copied for
   * every agent) and keeps the images as the template `key`. The run's
   * folders, namespace and groups go with it.
   */
  async #build(
    key: string,
    agentSpec: CreateRequest['spec'],
    plugin: FrameworkPlugin,
    shape: Record<string, unknown>
  ): Promise<void> {
    const runs = this.options.runs
    const templateId = randomUUID()
    let warmedUp = false
    const started = Date.now()
    // Its tokens: random, as long as an agent's, so that a copy's can be replaced in place.
    const gatewayToken = randomBytes(24).toString('hex')
    const modelProxyToken = randomLike(agentSpec.modelProxy.token)
    const spec = {
      agentId: templateId,
      framework: plugin.name,
      config: shape,
      modelProxy: { ...agentSpec.modelProxy, token: modelProxyToken },
    }
    // Its model calls (a warm-up turn, a catalogue refresh) never leave this host.
    const answeredHere = runs.answerModelCallsOf(spec.modelProxy)
    try {
      await runs.create({ spec, plugin, gatewayToken } as CreateRequest, key)
      const agent = runs.agent(templateId)
      await runs.start(templateId)
      const ready = await answers(
        `http://${agent.host}:${agent.port}${plugin.readinessPath}`,
        {},
        TEMPLATE_BOOT_TIMEOUT_MS
      )
      if (!ready) throw new Error('it did not get ready')
      // Only where its model calls are answered here: its token is nobody's, the model
      // proxy would refuse it (and a framework may remember a refusal).
      if (plugin.warmUpBeforeCheckpoint && answeredHere) {
        await this.#warmUp(plugin, templateId, gatewayToken, agent)
        warmedUp = true
      }
      const settling = Date.now()
      const settled = await settles(agent)
      const settledIn = Math.round((Date.now() - settling) / 100) / 10
      const prepared = agent.prepared!
      // shape(shape) is the shape: the template's launch is what its agents' is.
      const fingerprint = this.#runs.get(templateId)
      if (!fingerprint) throw new Error(`${plugin.name}'s template shape does not describe itself`)
      const taken = await runs.hibernate(templateId)
      if (!taken) throw new Error('it could not be checkpointed (its log says why)')
      const uid = agentUid(templateId)
      const runPaths = agentPaths(this.options.agentsDir, templateId)
      const meta = await new AgentCheckpoint(runPaths.checkpoint).meta()
      await this.options.store.install(
        key,
        runPaths.checkpoint,
        {
          key,
          fingerprint,
          framework: `${plugin.name}@${plugin.version}`,
          uid,
          gid: uid,
          marker: templateId,
          gatewayToken,
          modelProxyToken,
          port: prepared.port,
          bytes: meta?.bytes ?? 0,
          createdAt: new Date().toISOString(),
        },
        runPaths
      )
      this.options.log(
        `${plugin.name} template built in ${Math.round((Date.now() - started) / 100) / 10} s (${Math.round((meta?.bytes ?? 0) / 1024 / 1024)} MB${warmedUp ? ', after a warm-up turn' : ''}${settled ? `, settled in ${settledIn} s` : `, dumped unsettled after ${settledIn} s`})`
      )
    } finally {
      answeredHere?.()
      await runs.remove(templateId).catch(() => undefined)
      this.#runs.delete(templateId)
    }
  }
}
