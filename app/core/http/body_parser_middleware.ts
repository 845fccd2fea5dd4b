import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import app from '@adonisjs/core/services/app'
import BodyParserMiddleware from '@adonisjs/core/bodyparser_middleware'
import { ValidationException } from '#core/exceptions/api_exceptions'

/**
 * The framework's body parser, with one more client error named as such: a
 * JSON body nested so deep that keeping a copy of it (the request's
 * `setInitialBody` clones it recursively) overflows the stack. JSON.parse
 * itself copes; the clone throws a RangeError that would otherwise be a 500.
 * Only errors raised before the route runs are translated.
 */
export default class BodyParserGuardMiddleware {
  async handle(ctx: HttpContext, next: NextFn) {
    const parser = await app.container.make(BodyParserMiddleware)
    let routeReached = false
    try {
      return await parser.handle(ctx, () => {
        routeReached = true
        return next()
      })
    } catch (error) {
      if (!routeReached && error instanceof RangeError) {
        throw new ValidationException('The request body nests too deep to be read')
      }
      throw error
    }
  }
}
