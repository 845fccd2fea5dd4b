import type { HttpContext } from '@adonisjs/core/http'
import { AuthRequiredException, ForbiddenException } from '#core/exceptions/api_exceptions'
import {
  EXPORT_SIGNATURE_PURPOSE,
  downloadableExport,
  exportFilePath,
  requestExport,
} from '#identity/services/data_export_service'
import { userOfLiveRefreshToken } from '#identity/services/session_service'
import { readRefreshCookie } from '#identity/services/refresh_cookie'
import { authenticateBearer, bearerFromHeader } from '#identity/services/token_authenticator'

export default class DataExportController {
  async store({ auth }: HttpContext) {
    return requestExport(auth.getUserOrFail())
  }

  async download({ params, request, response }: HttpContext) {
    if (!request.hasValidSignature(EXPORT_SIGNATURE_PURPOSE)) {
      throw new ForbiddenException('The download link is invalid or has expired')
    }

    const bearer = bearerFromHeader(request.header('authorization'))
    const identity = bearer ? await authenticateBearer(bearer, { allow: ['jwt'] }) : null
    const user = identity ? identity.user : await userOfLiveRefreshToken(readRefreshCookie(request))
    if (!user) {
      throw new AuthRequiredException(
        'Sign in to your account in this browser (or send your JWT), then open the link again'
      )
    }

    const entry = await downloadableExport(String(params.id), user)
    const day = entry.createdAt.toUTC().toISODate()
    response.header('Cache-Control', 'private, no-store')
    response.attachment(exportFilePath(entry), `agent-host-export-${day}.zip`)
  }
}
