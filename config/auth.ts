import { defineConfig } from '@adonisjs/auth'
import type { Authenticators, InferAuthenticators, InferAuthEvents } from '@adonisjs/auth/types'
import { bearerGuard } from '#identity/guards/bearer_guard'

/**
 * Two bearer guards: `jwt` for the dashboard API, `api` (hk_ API keys) for
 * /api/v1. A credential of one kind is refused by the other guard.
 */
const authConfig = defineConfig({
  default: 'jwt',
  guards: {
    jwt: bearerGuard('jwt'),
    api: bearerGuard('api_key'),
  },
})

export default authConfig

declare module '@adonisjs/auth/types' {
  export interface Authenticators extends InferAuthenticators<typeof authConfig> {}
}
declare module '@adonisjs/core/types' {
  interface EventsList extends InferAuthEvents<Authenticators> {}
}
