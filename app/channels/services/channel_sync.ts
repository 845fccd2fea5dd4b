import { channelsConfig } from '#config/channels'
import type Agent from '#agents/models/agent'
import { decryptSecrets } from '#agents/services/config_secrets'
import { channelSettings, installedChannels } from '#channels/services/channel_config'
import { syncRowsWithConfig } from '#channels/services/channel_rows'
import { ChannelSupervisor } from '#channels/services/channel_supervisor'

/** This instance's supervisor; started by the channels provider in the web server. */
export const channelSupervisor = new ChannelSupervisor({
  publicUrl: channelsConfig.publicUrl,
  apiBaseUrls: channelsConfig.apiBaseUrls,
})

/**
 * After an agent's config was stored: rows follow config.channels (set
 * credentials connect, removed ones disconnect), and this instance looks
 * at them now rather than at its next tick.
 */
export async function syncAgentChannels(agent: Agent) {
  const settings = channelSettings(decryptSecrets(agent.config))
  const byConfig = installedChannels()
    .filter((plugin) => plugin.connectsBy === 'config')
    .map((plugin) => plugin.name)
  await syncRowsWithConfig(agent.id, settings, byConfig)
  void channelSupervisor.poke()
}
