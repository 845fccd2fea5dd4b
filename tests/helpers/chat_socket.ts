/**
 * A real `ws` client of the agent chat WebSocket (`/agents/:id/ws`), for the
 * chat tests and for tests of credentials that must end open sockets.
 *
 *   const socket = await connectChatSocket(`/agents/${agent.id}/ws`, { token: key })
 *   const { code } = await socket.closed
 */
import WebSocket from 'ws'
import { baseUrl } from '#tests/helpers/http'

export function wsUrl(path: string): string {
  return `${baseUrl().replace(/^http/, 'ws')}${path}`
}

export interface ChatSocketClient {
  ws: WebSocket
  /** The next message from the server (parsed). */
  next(): Promise<any>
  closed: Promise<{ code: number; reason: string }>
}

/** Resolves once the socket is open (or closed right away). */
export function connectChatSocket(
  path: string,
  options: { token?: string; protocols?: string[]; autoPong?: boolean } = {}
): Promise<ChatSocketClient> {
  const ws = new WebSocket(wsUrl(path), options.protocols ?? [], {
    headers: options.token ? { authorization: `Bearer ${options.token}` } : {},
    autoPong: options.autoPong ?? true,
  })
  const queue: any[] = []
  const waiting: ((message: any) => void)[] = []
  ws.on('message', (data) => {
    const message = JSON.parse(String(data))
    const waiter = waiting.shift()
    if (waiter) waiter(message)
    else queue.push(message)
  })
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) }))
  )
  const client: ChatSocketClient = {
    ws,
    closed,
    next: () =>
      queue.length > 0
        ? Promise.resolve(queue.shift())
        : new Promise((resolve) => waiting.push(resolve)),
  }
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(client))
    ws.once('error', reject)
  })
}

/** Sends a chat message and answers the server's next message. */
export async function chatOver(client: ChatSocketClient, message: unknown) {
  client.ws.send(JSON.stringify({ type: 'chat', payload: { message } }))
  return client.next()
}
