import { once } from 'node:events'
import type { HttpContext } from '@adonisjs/core/http'

/** Comment line sent this often so proxies keep an idle stream open. */
export const SSE_HEARTBEAT_MS = 15_000

/**
 * Writes `lines` as a `text/event-stream` (one `data:` event per line) on
 * the raw response until they end or the client goes away; `abort` is
 * aborted when the client disconnects so the producer stops. Headers set
 * on the Adonis response before (request id, CORS) are kept.
 */
export async function writeSse(
  { request, response }: HttpContext,
  lines: AsyncIterable<string>,
  abort: AbortController
): Promise<void> {
  const raw = response.response
  raw.writeHead(200, {
    ...response.getHeaders(),
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    'connection': 'keep-alive',
    'x-accel-buffering': 'no',
  })
  raw.flushHeaders()
  const onClose = () => abort.abort()
  raw.on('close', onClose)
  request.request.on('close', onClose)
  const heartbeat = setInterval(() => raw.write(': heartbeat\n\n'), SSE_HEARTBEAT_MS)
  try {
    raw.write(': stream open\n\n')
    for await (const line of lines) {
      if (abort.signal.aborted) break
      const event = line
        .split(/\r?\n|\r/)
        .map((part) => `data: ${part}`)
        .join('\n')
      if (!raw.write(`${event}\n\n`)) {
        await once(raw, 'drain', { signal: abort.signal }).catch(() => {})
      }
    }
  } catch (error) {
    // The client left (abort) or the producer failed after the headers: end the stream.
    if (!abort.signal.aborted) raw.write(`event: error\ndata: ${(error as Error).message}\n\n`)
  } finally {
    clearInterval(heartbeat)
    raw.off('close', onClose)
    abort.abort()
    if (!raw.writableEnded) raw.end()
  }
}
