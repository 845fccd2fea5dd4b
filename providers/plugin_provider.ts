import type { ApplicationService } from '@adonisjs/core/types'
import { loadPlugins } from '#plugins/plugin_loader'
import { PluginRegistry } from '#plugins/plugin_registry'

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
      return new PluginRegistry(await loadPlugins(this.app.makePath('plugins')))
    })
    this.app.container.alias('plugins', PluginRegistry)
  }

  async boot() {
    // Resolve now, so a broken plugin fails the boot instead of the first request.
    await this.app.container.make(PluginRegistry)
  }
}
