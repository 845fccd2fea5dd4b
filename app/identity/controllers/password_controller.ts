import type { HttpContext } from '@adonisjs/core/http'
import { changePassword, forgotPassword, resetPassword } from '#identity/services/password_service'
import {
  changePasswordValidator,
  forgotPasswordValidator,
  resetPasswordValidator,
} from '#identity/validators/auth_validators'
import { setRefreshCookie } from '#identity/services/refresh_cookie'

/** Password change and reset by mail (docs/accounts.md). */
export default class PasswordController {
  /**
   * @change
   * @summary Change the password
   * @description JWT. The current password proves it (400 naming currentPassword when wrong). Every session of the account ends (JWTs and refresh tokens); the answer is a new session for this client. API keys keep working (a reset by mail revokes them).
   * @requestBody {"currentPassword":"old-password","newPassword":"a-new-password"}
   * @responseBody 200 - {"success":true,"data":{"token":"eyJ...","refreshToken":"hrt_...","expiresIn":"7d"}}
   */
  async change({ auth, request, response }: HttpContext) {
    const { currentPassword, newPassword } = await request.validateUsing(changePasswordValidator)
    const tokens = await changePassword(auth.getUserOrFail(), currentPassword, newPassword)
    setRefreshCookie(response, tokens.refreshToken)
    return tokens
  }

  /**
   * @forgot
   * @summary Ask for a password reset link
   * @description The same answer for every address; a verified account gets a link valid 30 minutes, once (at most 3 mails an hour per address; 429 after 20 requests an hour from one client).
   * @requestBody {"email":"ada@example.com"}
   * @responseBody 200 - {"success":true,"data":{"sent":true}}
   */
  async forgot({ request }: HttpContext) {
    const { email } = await request.validateUsing(forgotPasswordValidator)
    await forgotPassword(email, request.ip())
    return { sent: true }
  }

  /**
   * @reset
   * @summary Choose a new password with a reset link's token
   * @description 400 naming token for an invalid, used or expired link. Every session of the account ends and every API key of the account is revoked (the password may have been stolen).
   * @requestBody {"token":"...","password":"a-new-password"}
   * @responseBody 200 - {"success":true,"data":{"reset":true}}
   */
  async reset({ request }: HttpContext) {
    const { token, password } = await request.validateUsing(resetPasswordValidator)
    await resetPassword(token, password)
    return { reset: true }
  }
}
