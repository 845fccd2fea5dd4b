import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'

/**
 * Every answer carries X-Request-Id (the client's own id when it sent one),
 * so a client report can be matched with the server's log lines.
 */
export default class RequestIdMiddleware {
  async handle(ctx: HttpContext, next: NextFn) {
    ctx.response.header('X-Request-Id', ctx.request.id() ?? '')
    return next()
  }
}
