import type { ApplicationService } from '@adonisjs/core/types'
import type { Server as HttpServer } from 'node:http'

/**
 * Attaches the chat WebSocket server to the service's HTTP server once it
 * exists: at `ready` for `node ace serve` / `npm start` (the server is
 * created before providers are ready), or - when the HTTP server is made
 * later, as the test runner does - at the moment it is handed to Adonis.
 */
export default class ChatProvider {
  constructor(protected app: ApplicationService) {}

  async ready() {
    if (!['web', 'test'].includes(this.app.getEnvironment())) return
    const server = await this.app.container.make('server')
    const { chatSocketServer } = await import('#chat/services/chat_socket_server')
    const existing = server.getNodeServer()
    if (existing) {
      chatSocketServer.attach(existing as HttpServer)
      return
    }
    const setNodeServer = server.setNodeServer.bind(server)
    server.setNodeServer = (nodeServer) => {
      setNodeServer(nodeServer)
      chatSocketServer.attach(nodeServer as HttpServer)
    }
  }

  async shutdown() {
    const { chatSocketServer } = await import('#chat/services/chat_socket_server')
    chatSocketServer.close()
  }
}
