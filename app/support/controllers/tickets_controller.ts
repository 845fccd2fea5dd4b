import type { HttpContext } from '@adonisjs/core/http'
import { createTicketValidator, ticketReplyValidator } from '#support/validators/ticket_validators'
import { addHolderReply, openTicket, ticketOf, ticketsOf } from '#support/services/ticket_service'

export default class TicketsController {
  async store({ auth, request, response }: HttpContext) {
    const input = await request.validateUsing(createTicketValidator)
    response.status(201)
    return openTicket(auth.getUserOrFail().id, input)
  }

  async index({ auth }: HttpContext) {
    return { tickets: await ticketsOf(auth.getUserOrFail().id) }
  }

  async show({ auth, params }: HttpContext) {
    return ticketOf(auth.getUserOrFail().id, params.id)
  }

  async reply({ auth, params, request, response }: HttpContext) {
    const { body } = await request.validateUsing(ticketReplyValidator)
    response.status(201)
    return addHolderReply(auth.getUserOrFail().id, params.id, body)
  }
}
