import type { ApplicationService } from '@adonisjs/core/types'
import { loadPlugins } from '#plugins/plugin_loader'
import { PluginRegistry } from '#plugins/plugin_registry'
import { setPluginRegistry } from '#plugins/services/plugins'

declare module '@adonisjs/core/types' {
  interface ContainerBindings {
    plugins: PluginRegistry
  }
}

/**
 * Finds every folder under plugins/ at boot and registers the plugin
 * registry. A malformed plugin stops boot with an error naming its folder.
 */
export default class PluginProvider {
  constructor(protected app: ApplicationService) {}

  register() {
    this.app.container.singleton(PluginRegistry, async () => {
      const plugins = []
      for (const folder of [this.app.makePath('plugins'), ...this.#testPluginFolders()]) {
        plugins.push(...(await loadPlugins(folder)))
      }
      return new PluginRegistry(plugins)
    })
    this.app.container.alias('plugins', PluginRegistry)
  }

  /**
   * Tests only (NODE_ENV=test): EXTRA_PLUGIN_DIRS, comma-separated folders
   * relative to the app root, adds test-only plugins (bin/test.ts sets
   * `tests/fixtures/plugins`, the fixture framework used by HTTP tests).
   */
  #testPluginFolders(): string[] {
    if (!this.app.inTest || !process.env.EXTRA_PLUGIN_DIRS) return []
    return process.env.EXTRA_PLUGIN_DIRS.split(',')
      .map((folder) => folder.trim())
      .filter(Boolean)
      .map((folder) => this.app.makePath(folder))
  }

  async boot() {
    // Resolve now, so a broken plugin fails the boot instead of the first request.
    setPluginRegistry(await this.app.container.make(PluginRegistry))
  }
}
