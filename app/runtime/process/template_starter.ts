import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import type { FrameworkPlugin } from '#plugins/types'
import { SERVICE_FOLDER, agentPaths } from '#runtime/agent_paths'
import type { CreateRequest } from '#runtime/types'
import type { AgentProcess } from '#runtime/process/agent_process'
import type { TemplateStart } from '#runtime/process/prepared_launch'
import { agentOwner } from '#runtime/process/agent_files'
import { agentUid } from '#runtime/process/sandbox'
import { waitAtMost } from '#runtime/process/bounded_wait'
import { identitySwaps } from '#runtime/process/file_identities'
import {
  carriedFolders,
  carryFolders,
  RESTORE_FAILURES_TO_REBUILD,
  templateKey,
  type TemplateCounts,
  type TemplateFallback,
  TemplateOutcomes,
  TemplateStore,
} from '#runtime/process/template'
import { TemplateBuilds, type TemplateRuns } from '#runtime/process/template_builds'
import { answers } from '#runtime/process/template_waits'

type TemplateShape = Record<string, unknown>

/**
 * How long a restored template may take to answer to the agent's own token.
 * Copies answered 0.1-2.1 s after their restore here; two restored at once
 * beside other gateways' boots (load ~10 on 2 cores) had not answered after
 * 10 s, and their cold boots then cost ~20 CPU-seconds each more.
 */
const TEMPLATE_PERSONALISE_TIMEOUT_MS = 30_000
/**
 * How long a new agent waits for its template while it is being built
 * rather than booting cold beside the build (a burst's cold boots would
 * slow the build they wait for): a build is one boot and a dump.
 */
const TEMPLATE_BUILD_WAIT_MS = 240_000

export interface TemplateStarterOptions {
  /** `<storage>/agents`: one folder per agent. */
  agentsDir: string
  /** The template shape of an agent of `plugin` with `config` (none: it never uses a template). */
  shapeOf: (plugin: FrameworkPlugin, config: Record<string, unknown>) => TemplateShape | undefined
  runs: TemplateRuns
  /** True once the service is stopping: no template is built any more. */
  stopping: () => boolean
  log: (message: string, detail?: Record<string, unknown>) => void
}

/**
 * The process driver's template wiring (app/runtime/process/template.ts):
 * a new agent's first start from its framework's template, the builds
 * (template_builds.ts), and the count of template starts and cold boots.
 */
export class TemplateStarter {
  /** Template starts and counted cold boots of new agents (counts()). */
  readonly #outcomes = new TemplateOutcomes()
  /** The templates on disk, in the service's own folder. */
  readonly #templates: TemplateStore
  readonly #builds: TemplateBuilds

  constructor(private readonly options: TemplateStarterOptions) {
    this.#templates = new TemplateStore(join(options.agentsDir, SERVICE_FOLDER, '.templates'))
    this.#builds = new TemplateBuilds({ ...options, store: this.#templates })
  }

  /** True for the id a template build runs its framework under (its events are nobody's). */
  isTemplateRun(agentId: string): boolean {
    return this.#builds.isTemplateRun(agentId)
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
      this.#builds.registerRun(spec.agentId, fingerprint)
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
    return this.#outcomes.counts()
  }

  /**
   * Builds (or rebuilds) the template new agents of this shape start from,
   * now, and waits for it. True when there is one afterwards.
   */
  async prepare(spec: CreateRequest['spec'], plugin: FrameworkPlugin): Promise<boolean> {
    const shape = this.options.shapeOf(plugin, spec.config)
    if (!shape) return false
    this.#builds.soon(templateKey(plugin.name, shape), spec, plugin, shape)
    await this.whenBuilt()
    return (await this.#templates.meta(templateKey(plugin.name, shape))) !== undefined
  }

  /**
   * At service start: builds the template of `shape` ahead of its first
   * agent unless one of this framework version is on disk (a stale launch
   * is found, and rebuilt, at the first agent's start).
   */
  async buildAhead(spec: CreateRequest['spec'], plugin: FrameworkPlugin): Promise<void> {
    const shape = this.options.shapeOf(plugin, spec.config)
    if (!shape) return
    const key = templateKey(plugin.name, shape)
    const meta = await this.#templates.meta(key)
    if (meta?.framework === `${plugin.name}@${plugin.version}`) return
    this.#builds.soon(key, spec, plugin, shape)
    await this.#builds.building(key)
  }

  /** Until the templates being built now are built (or failed). */
  whenBuilt(): Promise<void> {
    return this.#builds.whenBuilt()
  }

  /** The template `key` once the build under way (if any) is done, waiting at most `ms`. */
  async #afterBuild(key: string, ms: number) {
    const build = this.#builds.building(key)
    if (!build) return undefined
    await waitAtMost(build, ms)
    return this.#templates.meta(key)
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
        const waitStarted = Date.now()
        const meta =
          (await templates.meta(template.key)) ??
          (await this.#afterBuild(template.key, TEMPLATE_BUILD_WAIT_MS))
        if (meta && Date.now() - waitStarted > 1000) {
          const secs = Math.round((Date.now() - waitStarted) / 1000)
          this.options.log(`agent ${spec.agentId}: waited ${secs} s for its template's build`)
        }
        if (!meta || meta.fingerprint !== template.fingerprint) {
          if (meta) await templates.discard(template.key)
          this.#builds.soon(template.key, spec, plugin, template.shape)
          return {
            fallback: meta ? 'stale' : 'missing',
            reason: meta
              ? `the template of ${plugin.name} is of another launch (${meta.framework}); a new one is built`
              : `no template of ${plugin.name} for this config yet; one is built`,
          }
        }
        const dir = paths.templateCopy
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
        const rebuild = this.#outcomes.record(template.key, outcome)
        this.options.log(
          outcome === 'restored'
            ? `agent ${spec.agentId}: started from the ${plugin.name} template`
            : `agent ${spec.agentId}: cold boot instead of a template start (${outcome}: ${reason})`,
          { template: outcome }
        )
        if (rebuild) {
          this.options.log(
            `the ${plugin.name} template failed to restore ${RESTORE_FAILURES_TO_REBUILD} times in a row: built again`
          )
          this.#builds.soon(template.key, spec, plugin, template.shape, { discardFirst: true })
        }
      },
    }
  }
}
