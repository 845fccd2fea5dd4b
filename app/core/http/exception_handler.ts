import app from '@adonisjs/core/services/app'
import { type HttpContext, ExceptionHandler } from '@adonisjs/core/http'
import { mapError } from '#core/http/error_envelope'
import { ApiException } from '#core/exceptions/api_exceptions'
import { databaseUnavailableException, isDatabaseUnavailable } from '#core/database/database_errors'

/** An outage is logged once per interval, not once per failed request. */
const OUTAGE_LOG_EVERY_MS = 10_000
let lastOutageLogAt = 0
let failuresSinceLog = 0

/** A database outage is the service's 503, not a 500 per request. */
function asAnswerable(error: unknown): unknown {
  return !(error instanceof ApiException) && isDatabaseUnavailable(error)
    ? databaseUnavailableException(error)
    : error
}

/**
 * The one place where errors become HTTP answers: every failure leaves as
 * `{ success: false, error, code }`, and a 500 is logged with its request id.
 */
export default class HttpExceptionHandler extends ExceptionHandler {
  protected debug = !app.inProduction

  async handle(raw: unknown, ctx: HttpContext) {
    const error = asAnswerable(raw)
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

  async report(raw: unknown, ctx: HttpContext) {
    const error = asAnswerable(raw)
    if (error !== raw) {
      failuresSinceLog++
      if (Date.now() - lastOutageLogAt >= OUTAGE_LOG_EVERY_MS) {
        const reason = (raw as Error)?.message ?? String(raw)
        ctx.logger.warn(
          { reason, failedRequests: failuresSinceLog },
          'database unavailable: answering 503'
        )
        lastOutageLogAt = Date.now()
        failuresSinceLog = 0
      }
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
