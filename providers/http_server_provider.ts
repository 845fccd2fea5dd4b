import type { ApplicationService } from '@adonisjs/core/types'
import {
  answerClientErrorsInEnvelope,
  closeConnectionsOnShutdown,
  onNodeServer,
} from '#core/http/node_server'

/**
 * Settings of the Node HTTP server itself: requests it refuses are answered
 * in the envelope, and a shutdown never waits forever on a client.
 */
export default class HttpServerProvider {
  constructor(protected app: ApplicationService) {}

  async ready() {
    await onNodeServer(this.app, (server) => {
      answerClientErrorsInEnvelope(server)
      closeConnectionsOnShutdown(this.app, server)
    })
  }
}
