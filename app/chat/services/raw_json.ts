import type { HttpContext } from '@adonisjs/core/http'

/**
 * Writes a JSON answer as is, outside the `{ success, data }` envelope (the
 * OpenAI-compatible model proxy answers in OpenAI's own format).
 */
export function writeRawJson(ctx: HttpContext, status: number, payload: unknown): void {
  const body = JSON.stringify(payload)
  ctx.response.response.writeHead(status, {
    ...ctx.response.getHeaders(),
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
  })
  ctx.response.response.end(body)
}
