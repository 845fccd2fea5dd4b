import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import { isEnveloped, ok } from '#core/http/envelope'

function isJsonPayload(body: unknown): boolean {
  if (body === null) return true
  if (Array.isArray(body)) return true
  if (typeof body !== 'object') return typeof body === 'number' || typeof body === 'boolean'
  if (Buffer.isBuffer(body)) return false
  const proto = Object.getPrototypeOf(body)
  // Plain objects and serializable models; streams and other class instances pass through.
  return proto === Object.prototype || proto === null || typeof (body as any).toJSON === 'function'
}

/**
 * Wraps every JSON success body in `{ success: true, data }`. Plain text
 * (logs), streams (SSE) and bodies already enveloped pass through untouched.
 */
export default class EnvelopeMiddleware {
  async handle(ctx: HttpContext, next: NextFn) {
    await next()

    const { response } = ctx
    if (!response.hasContent || response.hasStream || response.hasFileToStream) return
    const body = response.getBody()
    if (isEnveloped(body) || !isJsonPayload(body)) return
    if (response.getStatus() >= 400) return

    response.send(ok(body))
  }
}
