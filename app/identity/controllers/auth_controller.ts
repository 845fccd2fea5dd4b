import { allowedOrigins } from '#config/cors'
import type { HttpContext } from '@adonisjs/core/http'
import {
  loginValidator,
  refreshValidator,
  registerValidator,
  resendVerificationValidator,
} from '#identity/validators/auth_validators'
import * as accounts from '#identity/services/account_service'
import * as sessions from '#identity/services/session_service'
import {
  clearRefreshCookie,
  readRefreshCookie,
  setRefreshCookie,
} from '#identity/services/refresh_cookie'
import {
  ApiException,
  AuthRequiredException,
  ForbiddenException,
} from '#core/exceptions/api_exceptions'
import { bearerFromHeader } from '#identity/services/token_authenticator'

const NEUTRAL_REGISTRATION =
  'If this address can be registered, a verification link is on its way. Verify your address, then sign in.'

export default class AuthController {
  async register({ request }: HttpContext) {
    const input = await request.validateUsing(registerValidator)
    await accounts.register(input, request.ip())
    return { registered: true, requiresVerification: true, message: NEUTRAL_REGISTRATION }
  }

  async verifyEmail({ params, request, response, view }: HttpContext) {
    const wantsHtml = request.accepts(['json', 'html']) === 'html'
    const onwards = { href: '/', label: 'Continue to Agent Host' }
    try {
      const outcome = await accounts.verifyEmail(String(params.token))
      const message =
        outcome === 'verified'
          ? 'Your e-mail address is verified. You can sign in now.'
          : 'Your e-mail address was already verified. You can sign in.'
      if (!wantsHtml) return { verified: true, message }
      return view.render('public/message', {
        title: 'E-mail verified',
        message,
        failed: false,
        hint: null,
        next: onwards,
      })
    } catch (error) {
      if (!wantsHtml || !(error instanceof ApiException)) throw error
      const html = await view.render('public/message', {
        title: 'This link did not work',
        message: error.message,
        failed: true,
        hint: 'Links work once and for 24 hours. Ask for a new one from the app (POST /auth/resend-verification with your address), then open the newest mail.',
        next: onwards,
      })
      return response.status(error.status).type('text/html').send(html)
    }
  }

  async resendVerification({ request }: HttpContext) {
    const { email } = await request.validateUsing(resendVerificationValidator)
    await accounts.resendVerification(email, request.ip())
    return {
      sent: true,
      message:
        'If this address belongs to an unverified account, a new verification link is on its way.',
    }
  }

  async login({ request, response }: HttpContext) {
    const { email, password } = await request.validateUsing(loginValidator)
    const result = await sessions.login(email, password, request.ip())
    setRefreshCookie(response, result.refreshToken)
    return result
  }

  async refresh({ request, response }: HttpContext) {
    const { refreshToken } = await request.validateUsing(refreshValidator)
    // The cookie rides along with any cross-site request: only allowed origins may use it.
    const origin = request.header('origin')
    if (!refreshToken && origin && !allowedOrigins.has(origin)) {
      throw new ForbiddenException('This origin may not use the refresh cookie')
    }
    const presented = refreshToken ?? readRefreshCookie(request)
    if (!presented) throw new AuthRequiredException('A refresh token is required')
    try {
      const tokens = await sessions.refresh(presented)
      setRefreshCookie(response, tokens.refreshToken)
      return tokens
    } catch (error) {
      clearRefreshCookie(response)
      throw error
    }
  }

  async logout({ request, response }: HttpContext) {
    const { refreshToken } = await request.validateUsing(refreshValidator)
    await sessions.logout(
      refreshToken ?? readRefreshCookie(request),
      bearerFromHeader(request.header('authorization'))
    )
    clearRefreshCookie(response)
    return { loggedOut: true }
  }
}
