import { randomBytes, randomUUID } from 'node:crypto'
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FrameworkPlugin } from '#plugins/types'
import { SERVICE_FOLDER, agentPaths } from '#runtime/agent_paths'
import { chatOnce } from '#runtime/chat_client'
import { warmUpRequest } from '#runtime/warm_up'
import type { CreateRequest } from '#runtime/types'
import type { AgentProcess } from '#runtime/process/agent_process'
import type { TemplateStart } from '#runtime/process/prepared_launch'
import { agentOwner } from '#runtime/process/agent_files'
import { AgentCheckpoint } from '#runtime/process/checkpoint'
import { agentUid } from '#runtime/process/sandbox'
import { identitySwaps } from '#runtime/process/file_identities'
import {
  carriedFolders,
  carryFolders,
  emptyTemplateCounts,
  templateKey,
  type TemplateCounts,
  type TemplateFallback,
  TemplateStore,
} from '#runtime/process/template'

/** How long a template's framework may take to answer its readiness path. */
const TEMPLATE_BOOT_TIMEOUT_MS = 180_000
/** How long a restored template may take to answer to the agent's own token. */
const TEMPLATE_PERSONALISE_TIMEOUT_MS = 10_000

/** A random string as long as `value`, of letters and digits (a stand-in for a token). */
function randomLike(value: string): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
  return [...randomBytes(value.length)].map((byte) => alphabet[byte % alphabet.length]).join('')
}

/** Until GET `url` answers 2xx (true) or the time is up (false; tried at least once). */
async function answers(url: string, headers: Record<string, string>, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      const response = await fetch(url, { headers, signal: AbortSignal.timeout(2000) })
      await response.body?.cancel()
      if (response.ok) return true
    } catch {
      // Not listening yet.
    }
    if (Date.now() >= deadline) return false
    await sleep(100)
  }
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

export interface TemplateStarterOptions {
  /** `<storage>/agents`: one folder per agent. */
  agentsDir: string
  runs: TemplateRuns
  /** True once the service is stopping: no template is built any more. */
  stopping: () => boolean
  log: (message: string, detail?: Record<string, unknown>) => void
}

/**
 * The process driver's template wiring (app/runtime/process/template.ts):
 * a new agent's first start from its framework's template, the builds of
 * templates (in the background, once at a time per key), and the count of
 * template starts and cold boots.
 */
export class TemplateStarter {
  /** Template starts and counted cold boots of new agents (counts()). */
  readonly #templateCounts: TemplateCounts = emptyTemplateCounts()
  /** Templates being built, by key. */
  readonly #templateBuilds = new Map<string, Promise<void>>()
  /** The ids the builds run their framework under: their events are nobody's. */
  readonly #templateAgents = new Set<string>()
  /** The fingerprint of each template run's launch. */
  readonly #buildFingerprints = new Map<string, string>()
  /** The templates on disk, in the service's own folder. */
  readonly #templates: TemplateStore

  constructor(private readonly options: TemplateStarterOptions) {
    this.#templates = new TemplateStore(join(options.agentsDir, SERVICE_FOLDER, '.templates'))
  }

  /** True for the id a template build runs its framework under (its events are nobody's). */
  isTemplateRun(agentId: string): boolean {
    return this.#templateAgents.has(agentId)
  }

  /**
   * A run just prepared (ProcessDriver's create): a template build's own
   * (`asTemplate`) is registered with its launch's fingerprint; a new
   * agent's first start, when it can be checkpointed and has a template
   * shape, goes through its template (`prepared.template`).
   */
  wire(run: {
    spec: CreateRequest['spec']
    plugin: FrameworkPlugin
    agent: AgentProcess
    gatewayToken: string
    shape?: Record<string, unknown>
    fingerprint?: string
    asTemplate: boolean
    newAgent: boolean
  }) {
    const { spec, plugin, agent, shape, fingerprint } = run
    if (run.asTemplate) {
      this.#templateAgents.add(spec.agentId)
      if (fingerprint) this.#buildFingerprints.set(spec.agentId, fingerprint)
    } else if (run.newAgent && shape && fingerprint && agent.prepared?.checkpoint) {
      agent.prepared.template = this.templateStart(spec, plugin, agent, {
        key: templateKey(plugin.name, shape),
        shape,
        fingerprint,
        gatewayToken: run.gatewayToken,
      })
    }
  }

  /** Template starts and counted cold boots of new agents since this driver began. */
  counts(): TemplateCounts {
    return structuredClone(this.#templateCounts)
  }

  /**
   * Builds (or rebuilds) the template new agents of this shape start from,
   * now, and waits for it. True when there is one afterwards.
   */
  async prepare(
    spec: CreateRequest['spec'],
    plugin: FrameworkPlugin,
    shape: Record<string, unknown>
  ): Promise<boolean> {
    this.#buildTemplateSoon(templateKey(plugin.name, shape), spec, plugin, shape)
    await this.whenBuilt()
    return (await this.#templates.meta(templateKey(plugin.name, shape))) !== undefined
  }

  /** Until the templates being built now are built (or failed). */
  async whenBuilt(): Promise<void> {
    await Promise.allSettled([...this.#templateBuilds.values()])
  }

  /**
   * How a new agent's first start uses its template: the agent's own copy of
   * the images (or why not, which builds the template meanwhile), and its
   * own token taken after the restore.
   */
  templateStart(
    spec: CreateRequest['spec'],
    plugin: FrameworkPlugin,
    agent: AgentProcess,
    template: {
      key: string
      shape: Record<string, unknown>
      fingerprint: string
      gatewayToken: string
    }
  ): TemplateStart {
    const settings = plugin.template!
    const paths = agentPaths(this.options.agentsDir, spec.agentId)
    const templates = this.#templates
    const { headers } = plugin.chatEndpoint({
      agentId: spec.agentId,
      gatewayToken: template.gatewayToken,
    })
    let templateToken: string | undefined
    return {
      copy: async () => {
        const meta = await templates.meta(template.key)
        if (!meta || meta.fingerprint !== template.fingerprint) {
          if (meta) await templates.discard(template.key)
          this.#buildTemplateSoon(template.key, spec, plugin, template.shape)
          return {
            fallback: meta ? 'stale' : 'missing',
            reason: meta
              ? `the template of ${plugin.name} is of another launch (${meta.framework}); a new one is built`
              : `no template of ${plugin.name} for this config yet; one is built`,
          }
        }
        const dir = join(paths.runtime, 'template-copy')
        try {
          const uid = agentUid(spec.agentId)
          // The template's own values in its memory, and what stands for each in the agent's.
          const values = {
            marker: spec.agentId,
            gatewayToken: template.gatewayToken,
            modelProxyToken: spec.modelProxy.token,
          }
          TemplateStore.assertPersonalisable(meta, values)
          await carryFolders(
            templates,
            template.key,
            this.options.agentsDir,
            paths,
            agentOwner(spec.agentId)
          )
          // After the carry, before its first process: the agent's entries as they will be.
          const swaps = await identitySwaps(
            await templates.identities(template.key),
            carriedFolders(paths)
          )
          await templates.personalisedCopy(template.key, dir, { uid, gid: uid, values, swaps })
          templateToken = meta.gatewayToken
          return { dir }
        } catch (error) {
          await rm(dir, { recursive: true, force: true })
          return { fallback: 'identity', reason: (error as Error).message }
        }
      },
      personalise: async (pid) => {
        if (settings.reloadSignal) {
          try {
            process.kill(pid, settings.reloadSignal)
          } catch (error) {
            return `could not signal it: ${(error as Error).message}`
          }
        }
        const url = `http://${agent.host}:${agent.port}${settings.tokenCheckPath}`
        const own = await answers(url, headers, TEMPLATE_PERSONALISE_TIMEOUT_MS)
        if (!own) {
          return `it did not answer to its own token within ${TEMPLATE_PERSONALISE_TIMEOUT_MS / 1000} s`
        }
        // The template's token must be refused: no copy of it may have been left in force.
        const { headers: templateHeaders } = plugin.chatEndpoint({
          agentId: spec.agentId,
          gatewayToken: templateToken ?? '',
        })
        if (await answers(url, templateHeaders, 0))
          return "it still answers to the template's token"
        return undefined
      },
      report: (outcome: 'restored' | TemplateFallback, reason?: string) => {
        if (outcome === 'restored') this.#templateCounts.restored++
        else this.#templateCounts.coldBoots[outcome]++
        this.options.log(
          outcome === 'restored'
            ? `agent ${spec.agentId}: started from the ${plugin.name} template`
            : `agent ${spec.agentId}: cold boot instead of a template start (${outcome}: ${reason})`,
          { template: outcome }
        )
      },
    }
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

  /** Builds the template `key` in the background, once at a time per key. */
  #buildTemplateSoon(
    key: string,
    spec: CreateRequest['spec'],
    plugin: FrameworkPlugin,
    shape: Record<string, unknown>
  ) {
    if (this.#templateBuilds.has(key) || this.options.stopping()) return
    const build = this.#buildTemplate(key, spec, plugin, shape)
      .catch((error) =>
        this.options.log(`${plugin.name} template could not be built: ${(error as Error).message}`)
      )
      .finally(() => this.#templateBuilds.delete(key))
    this.#templateBuilds.set(key, build)
  }

  /**
   * Boots the framework once from the shape alone (no secret, no
   * personality: a model proxy token and a gateway token of its own, both
   * worthless), under an id and uid of its own, in the fixed layout; once it
   * answers its readiness path, dumps it (uncompressed: it is copied for
   * every agent) and keeps the images as the template `key`. The run's
   * folders, namespace and groups go with it.
   */
  async #buildTemplate(
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
      const prepared = agent.prepared!
      // shape(shape) is the shape: the template's launch is what its agents' is.
      const fingerprint = this.#buildFingerprints.get(templateId)
      if (!fingerprint) throw new Error(`${plugin.name}'s template shape does not describe itself`)
      const taken = await runs.hibernate(templateId)
      if (!taken) throw new Error('it could not be checkpointed (its log says why)')
      const uid = agentUid(templateId)
      const runPaths = agentPaths(this.options.agentsDir, templateId)
      const meta = await new AgentCheckpoint(runPaths.checkpoint).meta()
      await this.#templates.install(
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
        `${plugin.name} template built in ${Math.round((Date.now() - started) / 100) / 10} s (${Math.round((meta?.bytes ?? 0) / 1024 / 1024)} MB${warmedUp ? ', after a warm-up turn' : ''})`
      )
    } finally {
      answeredHere?.()
      await runs.remove(templateId).catch(() => undefined)
      this.#templateAgents.delete(templateId)
      this.#buildFingerprints.delete(templateId)
    }
  }
}
