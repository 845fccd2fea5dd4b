import type { ApplicationService } from '@adonisjs/core/types'
import { onNodeServer } from '#core/http/node_server'

/** Attaches the chat WebSocket server to the service's HTTP server once it exists. */
export default class ChatProvider {
  constructor(protected app: ApplicationService) {}

  async ready() {
    if (!['web', 'test'].includes(this.app.getEnvironment())) return
    const { chatSocketServer } = await import('#chat/services/chat_socket_server')
    await onNodeServer(this.app, (server) => chatSocketServer.attach(server))
    // Before the HTTP server waits for its connections: say goodbye to each socket.
    this.app.terminating(() => chatSocketServer.close({ goingAway: true }))
    // Answered turns still being stored and settled are finished before the database closes.
    const { afterReply } = await import('#core/http/after_reply')
    this.app.terminating(() => afterReply.drain())
  }

  async shutdown() {
    const { chatSocketServer } = await import('#chat/services/chat_socket_server')
    chatSocketServer.close()
  }
}
