import type { HttpContext } from '@adonisjs/core/http'

/** Where a newcomer goes next, for people (HTML) and programs (JSON) alike. */
export const LANDING_LINKS = {
  docs: '/docs',
  openapi: '/openapi.json',
  console: '/console',
  health: '/health',
}

export default class LandingController {
  async handle({ request, view }: HttpContext) {
    if (request.accepts(['json', 'html']) === 'html') return view.render('public/landing')
    return { service: 'agent-host', ...LANDING_LINKS }
  }
}
