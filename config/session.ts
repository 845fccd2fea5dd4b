import app from '@adonisjs/core/services/app'
import { defineConfig, stores } from '@adonisjs/session'

/**
 * Console sessions (staff only; the dashboard API uses JWTs). The cookie
 * store keeps nothing on the server, so any instance serves any session;
 * the cookie is encrypted with APP_KEY. Every console request re-reads the
 * user row, so a role change or a disabled account takes effect at once.
 */
const sessionConfig = defineConfig({
  enabled: true,
  cookieName: 'console_session',
  clearWithBrowser: true,
  age: '8h',
  cookie: {
    path: '/',
    httpOnly: true,
    secure: app.inProduction,
    sameSite: 'strict',
  },
  store: 'cookie',
  stores: {
    cookie: stores.cookie(),
  },
})

export default sessionConfig
