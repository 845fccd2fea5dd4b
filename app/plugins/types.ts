/**
 * The two kinds of plugin found under plugins/<name>/index.ts. Each folder's
 * index exports one definition (default export) built with definePlugin().
 * Adding a framework or a channel means adding a folder; the core never
 * names a plugin.
 */

export type PluginKind = 'framework' | 'channel'

export interface PluginIdentity<K extends PluginKind> {
  kind: K
  /** Unique name; the framework name stored on agents or the channel name. */
  name: string
  /** Semantic version of the plugin itself. */
  version: string
  description?: string
}

// The two kinds' interfaces, each in a file of its own; imported from here by everyone.
export type * from '#plugins/framework_types'
export * from '#plugins/channel_types'

import type { FrameworkPlugin } from '#plugins/framework_types'
import type { ChannelPlugin } from '#plugins/channel_types'

export type Plugin = FrameworkPlugin | ChannelPlugin

/** Identity helper that gives plugin authors type checking. */
export function definePlugin<P extends Plugin>(plugin: P): P {
  return plugin
}
