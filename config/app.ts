import proxyAddr from 'proxy-addr'
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import env from '#start/env'
import app from '@adonisjs/core/services/app'
import { Secret } from '@adonisjs/core/helpers'
import { defineConfig } from '@adonisjs/core/http'

/**
 * The application key signs JWTs and cookies and encrypts stored secrets.
 * When APP_KEY is unset, bin/ entrypoints generate one into storage/ before
 * the app boots, so this always has a value here.
 */
export const appKey = new Secret(env.get('APP_KEY', ''))

const port = env.get('PORT', 3333)

/**
 * Public base URL ({base_url} of the spec): used in mail links, webhook
 * URLs and share links.
 */
export const appUrl = (env.get('APP_URL') ?? `http://localhost:${port}`).replace(/\/+$/, '')

export const http = defineConfig({
  generateRequestId: true,
  /**
   * A path with malformed percent-encoding never reaches the router; answer
   * it in the failure envelope like every other bad request.
   */
  onBadUrl(request: IncomingMessage, response: ServerResponse) {
    const requestId = String(request.headers['x-request-id'] ?? randomUUID())
    response.writeHead(400, {
      'content-type': 'application/json; charset=utf-8',
      'x-request-id': requestId,
    })
    response.end(
      JSON.stringify({
        success: false,
        error: 'Malformed URL: invalid percent-encoding',
        code: 'VALIDATION_ERROR',
      })
    )
  },
  allowMethodSpoofing: false,
  useAsyncLocalStorage: true,
  // TRUST_PROXY: addresses or CIDRs of the reverse proxies in front (or `loopback`,
  // `linklocal`, `uniquelocal`); only their X-Forwarded-For is believed, so
  // per-client limits see the real client. Unset: no proxy is trusted.
  trustProxy: env.get('TRUST_PROXY')
    ? proxyAddr.compile(
        env
          .get('TRUST_PROXY')!
          .split(',')
          .map((entry) => entry.trim())
          .filter(Boolean)
      )
    : () => false,
  cookie: {
    domain: '',
    path: '/',
    maxAge: '2h',
    httpOnly: true,
    secure: app.inProduction,
    sameSite: 'lax',
  },
})
