import type { HttpContext } from '@adonisjs/core/http'
import { SseStream } from '#core/http/sse_stream'

/**
 * Writes `lines` as a `text/event-stream` (one `data:` event per line) until
 * they end or the client goes away; `abort` is aborted when the client
 * disconnects so the producer stops.
 */
export async function writeSse(
  ctx: HttpContext,
  lines: AsyncIterable<string>,
  abort: AbortController
): Promise<void> {
  const stream = new SseStream(ctx)
  stream.open()
  const onClose = () => abort.abort()
  ctx.response.response.on('close', onClose)
  ctx.request.request.on('close', onClose)
  try {
    stream.comment('stream open')
    for await (const line of lines) {
      if (abort.signal.aborted) break
      await stream.sendText(line, abort.signal)
    }
  } catch (error) {
    // The client left (abort) or the producer failed after the headers: end the stream.
    if (!abort.signal.aborted) stream.event('error', (error as Error).message)
  } finally {
    ctx.response.response.off('close', onClose)
    abort.abort()
    stream.end()
  }
}
