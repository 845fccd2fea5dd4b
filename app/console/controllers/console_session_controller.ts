import type { HttpContext } from '@adonisjs/core/http'
import { DateTime } from 'luxon'
import User from '#identity/models/user'
import { authenticate } from '#identity/services/session_service'
import { ForbiddenException } from '#core/exceptions/api_exceptions'
import { SESSION_PENDING, SESSION_USER } from '#console/middleware/console_auth_middleware'
import { isStaff, needsTotp } from '#identity/services/staff_roles'
import {
  newRecoveryCodes,
  newTotpSecret,
  codeMatches,
  provisioning,
  sealSecret,
  verifySecondFactor,
} from '#console/services/totp_service'
import { audit } from '#console/services/audit_service'
import {
  consoleLoginValidator,
  secondFactorValidator,
} from '#console/validators/console_validators'

const SESSION_SETUP_SECRET = 'console_totp_setup_secret'

/**
 * Staff sign-in: password (same accounts and throttle as the API), then
 * the second factor when the account has one; operators and admins set
 * one up at their first sign-in. The session id is renewed at each step.
 */
export default class ConsoleSessionController {
  async showLogin({ view, session, response }: HttpContext) {
    if (session.get(SESSION_USER)) return response.redirect('/console')
    return view.render('console/pages/login', { error: session.flashMessages.get('error') })
  }

  async login({ request, session, response }: HttpContext) {
    const { email, password } = await request.validateUsing(consoleLoginValidator)
    let user: User
    try {
      user = await authenticate(email, password, request.ip())
    } catch (error) {
      session.flash('error', (error as Error).message)
      return response.redirect('/console/login')
    }
    if (!isStaff(user.role)) throw new ForbiddenException('Your account has no console access')

    session.regenerate()
    session.forget(SESSION_USER)
    session.put(SESSION_PENDING, user.id)
    if (user.totpEnabledAt) return response.redirect('/console/login/totp')
    if (needsTotp(user.role)) return response.redirect('/console/totp/setup')
    await this.#signIn(user, session)
    return response.redirect('/console')
  }

  async #signIn(user: User, session: HttpContext['session']) {
    session.regenerate()
    session.forget(SESSION_PENDING)
    session.forget(SESSION_SETUP_SECRET)
    session.put(SESSION_USER, user.id)
    await audit(user, { action: 'session.sign_in', targetType: 'session', targetId: user.id })
  }

  async #pending(session: HttpContext['session']): Promise<User | null> {
    const id = session.get(SESSION_PENDING)
    const user = typeof id === 'string' ? await User.find(id) : null
    return user && !user.disabledAt && isStaff(user.role) ? user : null
  }

  async showTotp({ view, session, response }: HttpContext) {
    const user = await this.#pending(session)
    if (!user || !user.totpEnabledAt) return response.redirect('/console/login')
    return view.render('console/pages/totp', { error: session.flashMessages.get('error') })
  }

  async verifyTotp({ request, session, response }: HttpContext) {
    const user = await this.#pending(session)
    if (!user || !user.totpEnabledAt) return response.redirect('/console/login')
    const { code } = await request.validateUsing(secondFactorValidator)
    const result = verifySecondFactor(user, code)
    if (!result.ok) {
      session.flash('error', 'That code is not valid; try the current one from your app')
      return response.redirect('/console/login/totp')
    }
    if (result.remainingRecovery) {
      user.totpRecoveryHashes = result.remainingRecovery
      await user.save()
    }
    await this.#signIn(user, session)
    return response.redirect('/console')
  }

  async showSetup({ view, session, response }: HttpContext) {
    const user = await this.#pending(session)
    if (!user) return response.redirect('/console/login')
    let secret = session.get(SESSION_SETUP_SECRET)
    if (typeof secret !== 'string') {
      secret = newTotpSecret()
      session.put(SESSION_SETUP_SECRET, secret)
    }
    return view.render('console/pages/totp_setup', {
      ...(await provisioning(user.email, secret)),
      error: session.flashMessages.get('error'),
    })
  }

  async confirmSetup({ request, session, response, view }: HttpContext) {
    const user = await this.#pending(session)
    const secret = session.get(SESSION_SETUP_SECRET)
    if (!user || typeof secret !== 'string') return response.redirect('/console/login')
    const { code } = await request.validateUsing(secondFactorValidator)
    if (!codeMatches(user.email, secret, code)) {
      session.flash(
        'error',
        'That code does not match; check the time on your device and try again'
      )
      return response.redirect('/console/totp/setup')
    }
    const recovery = newRecoveryCodes()
    user.totpSecretEncrypted = sealSecret(secret)
    user.totpEnabledAt = DateTime.now()
    user.totpRecoveryHashes = recovery.hashes
    await user.save()
    await audit(user, { action: 'session.totp_enabled', targetType: 'session', targetId: user.id })
    await this.#signIn(user, session)
    // Shown once: only their hashes are kept.
    return view.render('console/pages/recovery_codes', { codes: recovery.codes })
  }

  async logout({ session, response }: HttpContext) {
    session.clear()
    return response.redirect('/console/login')
  }
}
