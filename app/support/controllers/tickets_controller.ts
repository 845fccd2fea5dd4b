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
  async store({ auth, request, response }: HttpContext) {
    const input = await request.validateUsing(createTicketValidator)
    response.status(201)
    return openTicket(auth.getUserOrFail().id, input)
  }

  async index({ auth }: HttpContext) {
    return { tickets: await ticketsOf(auth.getUserOrFail().id) }
  }

  async show({ bouncer, params }: HttpContext) {
    const ticket = await findTicket(params.id)
    await bouncer.with(TicketPolicy).authorize('view', ticket)
    return ticketView(ticket)
  }

  async reply({ bouncer, params, request, response }: HttpContext) {
    const { body } = await request.validateUsing(ticketReplyValidator)
    const ticket = await findTicket(params.id)
    await bouncer.with(TicketPolicy).authorize('reply', ticket)
    response.status(201)
    return addHolderReply(ticket, body)
  }
}
