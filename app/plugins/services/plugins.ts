import type { PluginRegistry } from '#plugins/plugin_registry'

let registry: PluginRegistry

/** Called once by the plugin provider at boot. */
export function setPluginRegistry(loaded: PluginRegistry) {
  registry = loaded
}

/**
 * The plugin registry, for modules outside the container (a live binding:
 * read it at call time, never at import). No top-level await here: modules
 * imported while the app boots may import this one.
 */
export { registry as default }
