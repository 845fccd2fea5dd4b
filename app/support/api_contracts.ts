/** What the support routes take and answer (the source of their part of /openapi.json). */
import { describes, t } from '#core/openapi/shapes'
import { defineContracts } from '#core/openapi/contracts'
import { createTicketValidator, ticketReplyValidator } from '#support/validators/ticket_validators'
import type { TicketView } from '#support/services/ticket_service'

const ticket = t.named(
  'SupportTicket',
  describes<TicketView>()(
    t.object({
      id: t.uuid(),
      subject: t.string(),
      body: t.string(),
      category: t.string(),
      status: t.string(),
      replies: t.array(
        t.object({
          id: t.uuid(),
          author: t.enum(['staff', 'holder']),
          body: t.string(),
          createdAt: t.dateTime(),
        })
      ),
      createdAt: t.dateTime(),
      updatedAt: t.dateTime(),
    })
  )
)

export default defineContracts({
  'support.tickets.store': {
    summary: 'Open a support ticket',
    description:
      'category: technical, billing, account or other; subject 3-200, body 1-10000 characters.',
    body: createTicketValidator,
    responses: { 201: ticket },
  },
  'support.tickets.index': {
    summary: 'My support tickets',
    description:
      'Newest first; each with its status (open, waiting, closed) and its replies (staff and holder messages, oldest first).',
    responses: { 200: t.object({ tickets: t.array(ticket) }) },
  },
  'support.tickets.show': {
    summary: 'One of my support tickets',
    description: "404 for another account's ticket.",
    responses: { 200: ticket },
  },
  'support.tickets.reply': {
    summary: 'Reply to one of my tickets',
    description:
      "Adds the holder's message (1-10000 characters) and opens the ticket again for staff.",
    body: ticketReplyValidator,
    responses: { 201: ticket },
  },
})
