import type { ApplicationService } from '@adonisjs/core/types'
import { agentsDir, storageDir } from '#core/bootstrap/paths'
import { PluginRegistry } from '#plugins/plugin_registry'
import { createDriver } from '#runtime/driver_factory'
import { RuntimeService } from '#runtime/runtime_service'
import type { ImageSource } from '#runtime/docker/docker_driver'
import { agentCapacityConfig } from '#config/agent_capacity'
import { appKey } from '#config/app'
import { HostCapacityBook } from '#runtime/capacity/host_book'
import { HostPlacement } from '#runtime/placement/host_placement'
import { PlacedRuntimeService } from '#runtime/placement/placed_runtime_service'

declare module '@adonisjs/core/types' {
  interface ContainerBindings {
    runtime: RuntimeService
  }
}

/**
 * Registers the RuntimeService with the driver AGENT_RUNTIME names. On
 * shutdown it detaches from the agents' processes or containers without
 * stopping them: the next boot adopts them (the agents layer calls
 * `runtime.recover()` with the agents that should be running).
 */
export default class RuntimeProvider {
  #runtime?: RuntimeService

  constructor(protected app: ApplicationService) {}

  register() {
    this.app.container.singleton(RuntimeService, async (resolver) => {
      const logger = await resolver.make('logger')
      const storage = storageDir(this.app.appRoot)
      const agents = agentsDir(this.app.appRoot)
      const log = (message: string, detail?: Record<string, unknown>) =>
        logger.info(detail ?? {}, `runtime: ${message}`)
      const options = {
        driver: createDriver({
          runtime: process.env.AGENT_RUNTIME,
          images: process.env.AGENT_IMAGES as ImageSource | undefined,
          storageDir: storage,
          agentsDir: agents,
          appKey: appKey.release(),
          log,
          warn: (message) => logger.warn(`runtime: ${message}`),
        }),
        frameworks: await resolver.make(PluginRegistry),
        agentsDir: agents,
        capacity: agentCapacityConfig,
        log: (
          level: 'info' | 'warn' | 'error',
          message: string,
          detail?: Record<string, unknown>
        ) => logger[level](detail ?? {}, `runtime: ${message}`),
      }
      // The web server's process agents are placed among the instances of the host
      // (docs/runtime.md "Many machines"); ace commands and the test runner act alone.
      this.#runtime = this.#placed(options.driver.name)
        ? new PlacedRuntimeService({
            ...options,
            placement: new HostPlacement({ secret: appKey.release(), log }),
            capacityBook: new HostCapacityBook(log),
          })
        : new RuntimeService(options)
      return this.#runtime
    })
    this.app.container.alias('runtime', RuntimeService)
  }

  #placed(driver: string): boolean {
    return (
      driver === 'process' &&
      this.app.getEnvironment() === 'web' &&
      process.env.AGENT_PLACEMENT !== 'off'
    )
  }

  /**
   * The web server installs and warms the frameworks at once, in the
   * background, so the first agent created boots without waiting for them
   * (AGENT_PREPARE_FRAMEWORKS=off skips it; the test runner sets that).
   */
  async ready() {
    if (this.app.getEnvironment() !== 'web') return
    const placed = await this.app.container.make(RuntimeService)
    // Reachable by the other instances and holding leases before agents are recovered.
    if (placed instanceof PlacedRuntimeService) await placed.startPlacement()
    if (process.env.AGENT_PREPARE_FRAMEWORKS === 'off') return
    const runtime = await this.app.container.make(RuntimeService)
    const registry = await this.app.container.make(PluginRegistry)
    const plugins = registry.frameworks()
    const logger = await this.app.container.make('logger')
    const { newAgentSpec } = await import('#agents/services/runtime_spec')
    runtime.prepareFrameworks(plugins, newAgentSpec).catch((error) => {
      logger.warn({ err: error }, 'runtime: preparing the frameworks failed')
    })
  }

  async shutdown() {
    await this.#runtime?.shutdown()
  }
}
