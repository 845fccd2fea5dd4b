import type { HttpContext } from '@adonisjs/core/http'

/** Where a newcomer goes next, for people (HTML) and programs (JSON) alike. */
export const LANDING_LINKS = {
  docs: '/docs',
  openapi: '/openapi.json',
  console: '/console',
  health: '/health',
}

export default class LandingController {
  /**
   * @handle
   * @summary Service entry point
   * @description A browser (Accept: text/html first) gets a small HTML page with links to the API documentation, the staff console and the health check; any other client gets these links as JSON.
   * @responseBody 200 - {"success":true,"data":{"service":"agent-host","docs":"/docs","openapi":"/openapi.json","console":"/console","health":"/health"}}
   */
  async handle({ request, view }: HttpContext) {
    if (request.accepts(['json', 'html']) === 'html') return view.render('public/landing')
    return { service: 'agent-host', ...LANDING_LINKS }
  }
}
