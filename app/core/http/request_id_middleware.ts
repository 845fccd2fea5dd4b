import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import { requestCounter } from '#core/http/request_counter'

/**
 * Every answer carries X-Request-Id (the client's own id when it sent one),
 * so a client report can be matched with the server's log lines. Each
 * answer is also counted (requests and 5xx per minute, for the console).
 */
export default class RequestIdMiddleware {
  async handle(ctx: HttpContext, next: NextFn) {
    ctx.response.header('X-Request-Id', ctx.request.id() ?? '')
    const raw = ctx.response.response
    raw.once('finish', () => requestCounter.record(raw.statusCode))
    if (!ctx.request.url().startsWith('/console')) return next()
    // Console pages report their whole server time (dev tools, bench/console).
    const startedAt = process.hrtime.bigint()
    await next()
    const ms = Number(process.hrtime.bigint() - startedAt) / 1e6
    ctx.response.header('Server-Timing', `app;dur=${ms.toFixed(1)}`)
  }
}
