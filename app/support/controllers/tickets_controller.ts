import type { HttpContext } from '@adonisjs/core/http'
import { createTicketValidator } from '#support/validators/ticket_validators'
import { openTicket, ticketsOf } from '#support/services/ticket_service'

export default class TicketsController {
  /**
   * @store
   * @summary Open a support ticket
   * @description category: technical, billing, account or other; subject 3-200, body 1-10000 characters.
   * @requestBody {"subject":"Agent paused after upgrade","body":"My agent shows paused since this morning.","category":"technical"}
   * @responseBody 201 - {"success":true,"data":{"id":"7a1c...","subject":"Agent paused after upgrade","body":"My agent shows paused since this morning.","category":"technical","status":"open","createdAt":"2025-01-01T00:00:00.000Z","updatedAt":"2025-01-01T00:00:00.000Z"}}
   */
  async store({ auth, request, response }: HttpContext) {
    const input = await request.validateUsing(createTicketValidator)
    response.status(201)
    return openTicket(auth.getUserOrFail().id, input)
  }

  /**
   * @index
   * @summary My support tickets
   * @description Newest first.
   * @responseBody 200 - {"success":true,"data":{"tickets":[{"id":"7a1c...","subject":"Agent paused after upgrade","body":"My agent shows paused since this morning.","category":"technical","status":"open","createdAt":"2025-01-01T00:00:00.000Z","updatedAt":"2025-01-01T00:00:00.000Z"}]}}
   */
  async index({ auth }: HttpContext) {
    return { tickets: await ticketsOf(auth.getUserOrFail().id) }
  }
}
