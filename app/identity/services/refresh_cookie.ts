import type { HttpRequest as Request, HttpResponse as Response } from '@adonisjs/core/http'
import { appUrl } from '#config/app'
import { REFRESH_TTL_DAYS } from '#identity/services/session_service'

/** Spec: the refresh token also travels in this HttpOnly cookie. */
export const REFRESH_COOKIE = 'platform_refresh'

/** Only the auth routes (refresh, logout, export download) ever receive it. */
const COOKIE_PATH = '/auth'

function options() {
  return {
    path: COOKIE_PATH,
    httpOnly: true,
    sameSite: 'lax' as const,
    secure: appUrl.startsWith('https://'),
    domain: '',
  }
}

export function setRefreshCookie(response: Response, refreshToken: string) {
  response.plainCookie(REFRESH_COOKIE, refreshToken, {
    ...options(),
    maxAge: REFRESH_TTL_DAYS * 24 * 60 * 60,
    encode: false,
  })
}

export function clearRefreshCookie(response: Response) {
  response.clearCookie(REFRESH_COOKIE, options())
}

export function readRefreshCookie(request: Request): string | null {
  const value = request.plainCookie(REFRESH_COOKIE, { encoded: false })
  return typeof value === 'string' && value.length > 0 ? value : null
}
