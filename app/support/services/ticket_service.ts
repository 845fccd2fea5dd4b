import SupportTicket, { type TicketCategory } from '#support/models/support_ticket'

/** Tickets listed per request at most (newest first). */
const LIST_LIMIT = 200

export interface TicketView {
  id: string
  subject: string
  body: string
  category: TicketCategory
  status: string
  createdAt: string
  updatedAt: string
}

export function presentTicket(ticket: SupportTicket): TicketView {
  return {
    id: ticket.id,
    subject: ticket.subject,
    body: ticket.body,
    category: ticket.category,
    status: ticket.status,
    createdAt: ticket.createdAt.toUTC().toISO()!,
    updatedAt: ticket.updatedAt.toUTC().toISO()!,
  }
}

export async function openTicket(
  userId: string,
  input: { subject: string; body: string; category: TicketCategory }
): Promise<TicketView> {
  const ticket = await SupportTicket.create({ userId, ...input, status: 'open' })
  return presentTicket(ticket)
}

export async function ticketsOf(userId: string): Promise<TicketView[]> {
  const tickets = await SupportTicket.query()
    .where('user_id', userId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(LIST_LIMIT)
  return tickets.map(presentTicket)
}
