import type { ApplicationService } from '@adonisjs/core/types'
import { answerClientErrorsInEnvelope, onNodeServer } from '#core/http/node_server'

/** Settings of the Node HTTP server itself: requests it refuses are answered in the envelope. */
export default class HttpServerProvider {
  constructor(protected app: ApplicationService) {}

  async ready() {
    await onNodeServer(this.app, answerClientErrorsInEnvelope)
  }
}
