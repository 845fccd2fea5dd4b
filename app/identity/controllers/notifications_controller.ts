import type { HttpContext } from '@adonisjs/core/http'
import { markReadValidator } from '#identity/validators/auth_validators'
import notificationService, { presentNotification } from '#identity/services/notification_service'

export default class NotificationsController {
  /**
   * @index
   * @summary Unread notifications
   * @description Newest first (at most 100).
   * @responseBody 200 - {"success":true,"data":{"notifications":[{"id":"5c2e...","type":"welcome","title":"Welcome to Agent Host","body":"...","createdAt":"2025-01-01T00:00:00.000Z"}]}}
   */
  async index({ auth }: HttpContext) {
    const list = await notificationService.unreadFor(auth.getUserOrFail().id)
    return { notifications: list.map(presentNotification) }
  }

  /**
   * @markRead
   * @summary Mark notifications read
   * @description Only the caller's own notifications change; other ids are ignored.
   * @requestBody {"ids":["5c2e..."]}
   * @responseBody 200 - {"success":true,"data":{"updated":1}}
   */
  async markRead({ auth, request }: HttpContext) {
    const { ids } = await request.validateUsing(markReadValidator)
    return { updated: await notificationService.markRead(auth.getUserOrFail().id, ids) }
  }
}
