import type { HttpContext } from '@adonisjs/core/http'
import { createTicketValidator, ticketReplyValidator } from '#support/validators/ticket_validators'
import TicketPolicy from '#support/policies/ticket_policy'
import {
  addHolderReply,
  findTicket,
  openTicket,
  ticketView,
  ticketsOf,
} from '#support/services/ticket_service'

export default class TicketsController {
  /**
   * @store
   * @summary Open a support ticket
   * @description category: technical, billing, account or other; subject 3-200, body 1-10000 characters.
   * @requestBody {"subject":"Agent paused after upgrade","body":"My agent shows paused since this morning.","category":"technical"}
   * @responseBody 201 - {"success":true,"data":{"id":"7a1c...","subject":"Agent paused after upgrade","body":"My agent shows paused since this morning.","category":"technical","status":"open","replies":[],"createdAt":"2025-01-01T00:00:00.000Z","updatedAt":"2025-01-01T00:00:00.000Z"}}
   */
  async store({ auth, request, response }: HttpContext) {
    const input = await request.validateUsing(createTicketValidator)
    response.status(201)
    return openTicket(auth.getUserOrFail().id, input)
  }

  /**
   * @index
   * @summary My support tickets
   * @description Newest first; each with its status (open, waiting, closed) and its replies (staff and holder messages, oldest first).
   * @responseBody 200 - {"success":true,"data":{"tickets":[{"id":"7a1c...","subject":"Agent paused after upgrade","body":"My agent shows paused since this morning.","category":"technical","status":"waiting","replies":[{"id":"3f2e...","author":"staff","body":"We resumed it; please check.","createdAt":"2025-01-01T01:00:00.000Z"}],"createdAt":"2025-01-01T00:00:00.000Z","updatedAt":"2025-01-01T01:00:00.000Z"}]}}
   */
  async index({ auth }: HttpContext) {
    return { tickets: await ticketsOf(auth.getUserOrFail().id) }
  }

  /**
   * @show
   * @summary One of my support tickets
   * @description 404 for another account's ticket.
   * @responseBody 200 - {"success":true,"data":{"id":"7a1c...","subject":"Agent paused after upgrade","body":"My agent shows paused since this morning.","category":"technical","status":"waiting","replies":[{"id":"3f2e...","author":"staff","body":"We resumed it; please check.","createdAt":"2025-01-01T01:00:00.000Z"}],"createdAt":"2025-01-01T00:00:00.000Z","updatedAt":"2025-01-01T01:00:00.000Z"}}
   * @responseBody 404 - {"success":false,"error":"Ticket not found","code":"NOT_FOUND"}
   */
  async show({ bouncer, params }: HttpContext) {
    const ticket = await findTicket(params.id)
    await bouncer.with(TicketPolicy).authorize('view', ticket)
    return ticketView(ticket)
  }

  /**
   * @reply
   * @summary Reply to one of my tickets
   * @description Adds the holder's message (1-10000 characters) and opens the ticket again for staff.
   * @requestBody {"body":"Still paused, see screenshot."}
   * @responseBody 201 - {"success":true,"data":{"id":"7a1c...","subject":"Agent paused after upgrade","body":"My agent shows paused since this morning.","category":"technical","status":"open","replies":[{"id":"9d0a...","author":"holder","body":"Still paused, see screenshot.","createdAt":"2025-01-01T02:00:00.000Z"}],"createdAt":"2025-01-01T00:00:00.000Z","updatedAt":"2025-01-01T02:00:00.000Z"}}
   * @responseBody 404 - {"success":false,"error":"Ticket not found","code":"NOT_FOUND"}
   */
  async reply({ bouncer, params, request, response }: HttpContext) {
    const { body } = await request.validateUsing(ticketReplyValidator)
    const ticket = await findTicket(params.id)
    await bouncer.with(TicketPolicy).authorize('reply', ticket)
    response.status(201)
    return addHolderReply(ticket, body)
  }
}
