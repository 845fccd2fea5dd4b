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
  async change({ auth, request, response }: HttpContext) {
    const { currentPassword, newPassword } = await request.validateUsing(changePasswordValidator)
    const tokens = await changePassword(auth.getUserOrFail(), currentPassword, newPassword)
    setRefreshCookie(response, tokens.refreshToken)
    return tokens
  }

  async forgot({ request }: HttpContext) {
    const { email } = await request.validateUsing(forgotPasswordValidator)
    await forgotPassword(email, request.ip())
    return { sent: true }
  }

  async reset({ request }: HttpContext) {
    const { token, password } = await request.validateUsing(resetPasswordValidator)
    await resetPassword(token, password)
    return { reset: true }
  }
}
