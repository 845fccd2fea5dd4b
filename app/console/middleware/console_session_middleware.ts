import type { HttpContext } from '@adonisjs/core/http'
import type { NextFn } from '@adonisjs/core/types/http'
import app from '@adonisjs/core/services/app'
import emitter from '@adonisjs/core/services/emitter'
import { configProvider } from '@adonisjs/core'
import { Session } from '@adonisjs/session'
import SessionMiddleware from '@adonisjs/session/session_middleware'
import type { ResolvedSessionConfig } from '@adonisjs/session/types'

/** Sent by console.js when a live message makes a page re-fetch itself. */
export const LIVE_REFRESH_HEADER = 'x-console-refresh'

let sessionConfig: Promise<ResolvedSessionConfig> | undefined

function resolveSessionConfig(): Promise<ResolvedSessionConfig> {
  sessionConfig ??= configProvider
    .resolve<ResolvedSessionConfig>(app, app.config.get('session'))
    .then((config) => {
      if (!config) throw new Error('config/session.ts does not use defineConfig')
      return config
    })
  return sessionConfig
}

/**
 * The console's session. A live refresh opens the session but never saves it:
 * it runs while the page may be posting a form, and saving would take the
 * flash notice meant for the page the post redirects to, or (sessions live in
 * a cookie) answer with a cookie that overwrites the one the post just set.
 */
export default class ConsoleSessionMiddleware {
  async handle(ctx: HttpContext, next: NextFn) {
    if (ctx.request.header(LIVE_REFRESH_HEADER) !== '1') {
      const sessions = await app.container.make(SessionMiddleware)
      return sessions.handle(ctx, next)
    }
    const config = await resolveSessionConfig()
    ctx.session = new Session(config, config.stores[config.store], emitter, ctx)
    await ctx.session.initiate(false)
    return next()
  }
}
