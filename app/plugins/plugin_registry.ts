import type { ChannelPlugin, FrameworkPlugin, Plugin } from '#plugins/types'
import { NotFoundException } from '#core/exceptions/api_exceptions'

/**
 * The installed plugins, loaded once at boot by the plugin provider.
 * Read-only after boot, so it holds no state another instance would need.
 */
export class PluginRegistry {
  readonly #frameworks = new Map<string, FrameworkPlugin>()
  readonly #channels = new Map<string, ChannelPlugin>()

  constructor(plugins: Plugin[] = []) {
    for (const plugin of plugins) {
      if (plugin.kind === 'framework') this.#frameworks.set(plugin.name, plugin)
      else this.#channels.set(plugin.name, plugin)
    }
  }

  list(): Plugin[] {
    return [...this.#frameworks.values(), ...this.#channels.values()]
  }

  frameworks(): FrameworkPlugin[] {
    return [...this.#frameworks.values()]
  }

  channels(): ChannelPlugin[] {
    return [...this.#channels.values()]
  }

  findFramework(name: string): FrameworkPlugin | undefined {
    return this.#frameworks.get(name)
  }

  findChannel(name: string): ChannelPlugin | undefined {
    return this.#channels.get(name)
  }

  framework(name: string): FrameworkPlugin {
    const plugin = this.findFramework(name)
    if (!plugin) throw new NotFoundException(`Framework "${name}" is not installed`)
    return plugin
  }

  channel(name: string): ChannelPlugin {
    const plugin = this.findChannel(name)
    if (!plugin) throw new NotFoundException(`Channel "${name}" is not installed`)
    return plugin
  }
}
