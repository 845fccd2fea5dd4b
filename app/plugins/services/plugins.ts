import app from '@adonisjs/core/services/app'
import type { PluginRegistry } from '#plugins/plugin_registry'

let registry: PluginRegistry

await app.booted(async () => {
  registry = await app.container.make('plugins')
})

/** The plugin registry, for modules outside the container. */
export { registry as default }
