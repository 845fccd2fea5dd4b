import type { Server as HttpServer } from 'node:http'
import type { Socket } from 'node:net'
import type { ApplicationService } from '@adonisjs/core/types'

/**
 * Calls `attach` with the service's Node HTTP server once it exists: at
 * `ready` for `npm start` (created before providers are ready), or when it
 * is handed to Adonis later, as the test runner does.
 */
export async function onNodeServer(app: ApplicationService, attach: (server: HttpServer) => void) {
  const server = await app.container.make('server')
  const existing = server.getNodeServer()
  if (existing) return attach(existing as HttpServer)
  const setNodeServer = server.setNodeServer.bind(server)
  server.setNodeServer = (nodeServer) => {
    setNodeServer(nodeServer)
    attach(nodeServer as HttpServer)
  }
}

/** How long open streams and sockets get to finish once the service is told to stop. */
export const SHUTDOWN_GRACE_MS = 5_000

/**
 * Node's `server.close()` (Adonis's shutdown) waits for every open
 * connection, so one SSE stream, live log or WebSocket kept a stopping
 * service alive forever. On shutdown idle keep-alive connections close at
 * once and the rest after a short grace; registered at `ready`, this hook
 * runs before Adonis's own close (terminating hooks run newest first).
 */
export function closeConnectionsOnShutdown(app: ApplicationService, server: HttpServer) {
  // Every socket, upgraded ones (WebSockets) included: Node stops tracking those after the upgrade.
  const sockets = new Set<Socket>()
  server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  app.terminating(() => {
    server.closeIdleConnections()
    setTimeout(() => {
      server.closeAllConnections()
      for (const socket of sockets) socket.destroy()
    }, SHUTDOWN_GRACE_MS).unref()
  })
}

/**
 * Requests Node's HTTP parser refuses before the app sees them (a header
 * value with forbidden bytes, a malformed request line) get a 400 in the
 * spec's envelope instead of Node's bare, empty answer.
 */
export function answerClientErrorsInEnvelope(server: HttpServer) {
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy()
    const tooLarge = error.code === 'HPE_HEADER_OVERFLOW'
    const body = JSON.stringify({
      success: false,
      error: tooLarge ? 'The request headers are too large' : 'The request could not be parsed',
      code: 'VALIDATION_ERROR',
    })
    socket.end(
      `HTTP/1.1 ${tooLarge ? '431 Request Header Fields Too Large' : '400 Bad Request'}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        'Connection: close\r\n\r\n' +
        body
    )
  })
}
