import { defineConfig } from '@adonisjs/cors'
import env from '#start/env'
import { appUrl } from '#config/app'

/**
 * Origins a browser may call the API from with credentials (the refresh
 * cookie): APP_URL's, plus CORS_ORIGINS (comma-separated). Any other origin
 * gets no CORS headers, so a page elsewhere can neither read answers nor
 * use the cookie (a reflected origin with credentials let any site mint
 * tokens). Clients that are not browsers send no Origin and are unaffected.
 */
export const allowedOrigins = new Set(
  [appUrl, ...(env.get('CORS_ORIGINS') ?? '').split(',')]
    .map((value) => value.trim())
    .filter(Boolean)
    .map((value) => {
      try {
        return new URL(value).origin
      } catch {
        return ''
      }
    })
    .filter(Boolean)
)

const corsConfig = defineConfig({
  enabled: true,
  origin: (requestOrigin) => allowedOrigins.has(requestOrigin),
  methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
  headers: true,
  exposeHeaders: [
    'x-request-id',
    'x-ratelimit-limit',
    'x-ratelimit-remaining',
    'x-ratelimit-reset',
  ],
  credentials: true,
  maxAge: 90,
})

export default corsConfig
