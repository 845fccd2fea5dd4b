import type { HttpContext } from '@adonisjs/core/http'
import { markReadValidator } from '#identity/validators/auth_validators'
import notificationService, { presentNotification } from '#identity/services/notification_service'

export default class NotificationsController {
  async index({ auth }: HttpContext) {
    const list = await notificationService.unreadFor(auth.getUserOrFail().id)
    return { notifications: list.map(presentNotification) }
  }

  async markRead({ auth, request }: HttpContext) {
    const { ids } = await request.validateUsing(markReadValidator)
    return { updated: await notificationService.markRead(auth.getUserOrFail().id, ids) }
  }
}
