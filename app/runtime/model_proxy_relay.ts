import http from 'node:http'
import type { AddressInfo } from 'node:net'

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
 * Agents never reach the service's own listener: they reach a relay on their
 * network's host address (the docker bridge's gateway, the process driver's
 * agents bridge) that forwards model proxy requests to the service and
 * answers 404 to everything else. It listens on `preferredPort` when that is
 * free there (running agents keep the address they were given across service
 * restarts), else on any port (`exact`: else not at all). `shared`: several
 * instances of the service on the host listen on the port together
 * (SO_REUSEPORT), so the port lives while any of them does.
 */
export async function startModelProxyRelay(options: {
  host: string
  target: URL
  preferredPort?: number
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
