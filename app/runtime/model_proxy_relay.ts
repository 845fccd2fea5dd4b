import { randomUUID } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { WARM_UP_REPLY } from '#runtime/warm_up'

/** A listener on an agents' network that forwards the model proxy's routes (`/v1/...`) only. */
export interface ModelProxyRelay {
  host: string
  port: number
  server: http.Server
}

/** The host and port an HTTP request to `target` connects to (loopback names as addresses). */
function upstreamOf(target: URL) {
  return {
    host: target.hostname === 'localhost' ? '127.0.0.1' : target.hostname.replace(/^\[|\]$/g, ''),
    port: target.port || 80,
  }
}

/**
 * The relay's own answer to a caller whose calls never leave the host (a
 * template's framework, booted with a worthless token: its warm-up turn,
 * its catalogue refresh): a chat completion is WARM_UP_REPLY, streamed or
 * not as asked; the model list holds `model`; anything else 404.
 */
function answerHere(request: http.IncomingMessage, response: http.ServerResponse, listed: string) {
  const chunks: Buffer[] = []
  request.on('data', (chunk: Buffer) => chunks.push(chunk))
  request.on('end', () => {
    const json = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' })
      response.end(JSON.stringify(body))
    }
    const path = request.url?.split('?')[0]
    if (request.method === 'GET' && path === '/v1/models') {
      const data = [{ id: listed, object: 'model', created: 0, owned_by: 'agent-host' }]
      return json(200, { object: 'list', data })
    }
    if (request.method !== 'POST' || path !== '/v1/chat/completions') {
      return json(404, { error: { message: 'not here', type: 'invalid_request_error' } })
    }
    let body: { model?: unknown; stream?: unknown }
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    } catch {
      return json(400, { error: { message: 'not JSON', type: 'invalid_request_error' } })
    }
    const id = `chatcmpl-${randomUUID()}`
    const created = Math.floor(Date.now() / 1000)
    const model = typeof body.model === 'string' ? body.model : 'template'
    const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
    const message = { role: 'assistant', content: WARM_UP_REPLY }
    if (body.stream !== true) {
      return json(200, {
        ...{ id, object: 'chat.completion', created, model, usage },
        choices: [{ index: 0, message, finish_reason: 'stop' }],
      })
    }
    response.writeHead(200, { 'content-type': 'text/event-stream' })
    const chunk = (choices: unknown[], extra = {}) =>
      response.write(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices, ...extra })}\n\n`
      )
    chunk([{ index: 0, delta: message, finish_reason: null }])
    chunk([{ index: 0, delta: {}, finish_reason: 'stop' }])
    chunk([], { usage })
    response.end('data: [DONE]\n\n')
  })
}

/**
 * Agents never reach the service's own listener: they reach a relay on their
 * network's host address (the docker bridge's gateway, the process driver's
 * agents bridge) that forwards model proxy requests to the service and
 * answers 404 to everything else. It listens on `preferredPort` when that is
 * free there (running agents keep the address they were given across service
 * restarts), else on any port (`exact`: else not at all). `shared`: several
 * instances of the service on the host listen on the port together
 * (SO_REUSEPORT), so the port lives while any of them does. A request whose
 * Authorization header `answersHere` names a model for is answered by the
 * relay itself (answerHere).
 */
export async function startModelProxyRelay(options: {
  host: string
  target: URL
  preferredPort?: number
  answersHere?: (authorization: string | undefined) => string | undefined
  shared?: boolean
  exact?: boolean
}): Promise<ModelProxyRelay> {
  const upstream = upstreamOf(options.target)
  const server = http.createServer((request, response) => {
    if (!request.url?.startsWith('/v1/')) {
      response.writeHead(404, { 'content-type': 'application/json' })
      response.end(
        '{"success":false,"error":"Only the model proxy is reachable from agents","code":"NOT_FOUND"}'
      )
      return
    }
    const here = options.answersHere?.(request.headers.authorization)
    if (here !== undefined) return answerHere(request, response, here)
    const forwarded = http.request(
      { ...upstream, method: request.method, path: request.url, headers: request.headers },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(response)
      }
    )
    forwarded.once('error', () => {
      if (!response.headersSent) response.writeHead(502)
      response.end()
    })
    request.pipe(forwarded)
  })
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen({ port, host: options.host, reusePort: options.shared === true }, () => {
        server.off('error', reject)
        resolve()
      })
    })
  const preferred = listen(options.preferredPort ?? 0)
  await (options.exact ? preferred : preferred.catch(() => listen(0)))
  server.unref()
  return { host: options.host, port: (server.address() as AddressInfo).port, server }
}

/** True for a URL on this host's loopback. */
export function isLoopbackUrl(url: URL): boolean {
  return ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname)
}
