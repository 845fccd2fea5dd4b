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
  /**
   * @store
   * @summary Export my data
   * @description Prepares a ZIP (profile, API keys without secrets, notifications, tickets, AI Credit ledger, agents, conversations, configurations with secrets masked, payments) and e-mails a signed download link valid 7 days. One export at a time (409 while one is in progress).
   * @responseBody 200 - {"success":true,"data":{"status":"processing","message":"Your data export is being prepared; a download link will be e-mailed to you."}}
   */
  async store({ auth }: HttpContext) {
    return requestExport(auth.getUserOrFail())
  }

  /**
   * @download
   * @summary Download a data export
   * @description The mailed link. Needs its valid signature AND the owner signed in: a JWT in the Authorization header, or, for a browser opening the link, the HttpOnly platform_refresh cookie of a live session.
   * @responseBody 200 - application/zip
   */
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
