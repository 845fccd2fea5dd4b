import type { ApplicationService } from '@adonisjs/core/types'

/**
 * Starts this instance's channel supervisor once the HTTP server is ready
 * (web environment only, like the periodic jobs) and closes its
 * connections on shutdown, freeing their leases for another instance.
 */
export default class ChannelsProvider {
  constructor(protected app: ApplicationService) {}

  async ready() {
    if (this.app.getEnvironment() !== 'web' || process.env.PERIODIC_JOBS === 'false') return
    const { channelSupervisor } = await import('#channels/services/channel_sync')
    channelSupervisor.start()
  }

  async shutdown() {
    const { channelSupervisor } = await import('#channels/services/channel_sync')
    await channelSupervisor.stop()
  }
}
