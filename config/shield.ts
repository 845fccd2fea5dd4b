import { defineConfig } from '@adonisjs/shield'

/**
 * Shield runs on console routes only (as named middleware): CSRF tokens on
 * every form, frames denied, no content sniffing. The JSON APIs use bearer
 * credentials, which a cross-site form cannot send.
 */
const shieldConfig = defineConfig({
  csp: {
    enabled: true,
    directives: {
      defaultSrc: [`'self'`],
      scriptSrc: [`'self'`],
      styleSrc: [`'self'`],
      imgSrc: [`'self'`, 'data:'],
      connectSrc: [`'self'`],
      formAction: [`'self'`],
      frameAncestors: [`'none'`],
    },
    reportOnly: false,
  },
  csrf: {
    enabled: true,
    exceptRoutes: [],
    enableXsrfCookie: false,
    methods: ['POST', 'PUT', 'PATCH', 'DELETE'],
  },
  xFrame: { enabled: true, action: 'DENY' },
  hsts: { enabled: false, maxAge: '180 days' },
  contentTypeSniffing: { enabled: true },
})

export default shieldConfig
