import app from '@adonisjs/core/services/app'
import { type HttpContext, ExceptionHandler } from '@adonisjs/core/http'
import { mapError } from '#core/http/error_envelope'
import { ApiException } from '#core/exceptions/api_exceptions'
import { dependencyFailure, logDependencyFailure } from '#core/http/dependency_failures'
import { methodNotAllowed } from '#core/http/allowed_methods'

/**
 * The one place where errors become HTTP answers: every failure leaves as
 * `{ success: false, error, code }`, and a 500 is logged with its request id.
 */
export default class HttpExceptionHandler extends ExceptionHandler {
  protected debug = !app.inProduction

  async handle(raw: unknown, ctx: HttpContext) {
    const error = dependencyFailure(raw)?.answer ?? methodNotAllowed(raw, ctx.request) ?? raw
    const mapped = mapError(error)
    ctx.response.header('X-Request-Id', ctx.request.id() ?? '')
    if (error instanceof ApiException) {
      for (const [name, value] of Object.entries(error.headers)) ctx.response.header(name, value)
    }
    // The console is HTML: its failures are pages saying what went wrong.
    if (ctx.request.url().startsWith('/console') && 'view' in ctx) {
      const html = await ctx.view.render('console/pages/error', {
        status: mapped.status,
        message: mapped.body.error,
        requestId: ctx.request.id(),
      })
      return ctx.response
        .status(mapped.status)
        .header('content-type', 'text/html; charset=utf-8')
        .send(html)
    }
    ctx.response.status(mapped.status).json(mapped.body)
  }

  async report(error: unknown, ctx: HttpContext) {
    const failure = dependencyFailure(error)
    if (failure) {
      logDependencyFailure(failure, error, (fields, message) => ctx.logger.error(fields, message))
      return
    }
    const mapped = mapError(error)
    if (mapped.unexpected) {
      ctx.logger.error(
        {
          err: error,
          requestId: ctx.request.id(),
          url: ctx.request.url(),
          method: ctx.request.method(),
        },
        'unhandled error'
      )
    }
  }
}
