import db from '@adonisjs/lucid/services/db'
import emitter from '@adonisjs/core/services/emitter'
import { NotFoundException } from '#core/exceptions/api_exceptions'
import { isUuid } from '#core/http/ids'
import SupportTicket, { type TicketCategory } from '#support/models/support_ticket'
import SupportTicketReply from '#support/models/support_ticket_reply'

/** Tickets listed per request at most (newest first). */
const LIST_LIMIT = 200

/** Raised whenever a ticket is opened or its thread, status or assignee changes. */
export const TICKET_CHANGED = 'support:ticket_changed'

export interface TicketChange {
  ticketId: string
  change: 'opened' | 'holder_reply' | 'staff_reply' | 'note' | 'status' | 'assigned'
}

declare module '@adonisjs/core/types' {
  interface EventsList {
    [TICKET_CHANGED]: TicketChange
  }
}

export interface ReplyView {
  id: string
  /** `staff` for the service's support team, `holder` for the account holder. */
  author: 'staff' | 'holder'
  body: string
  createdAt: string
}

export interface TicketView {
  id: string
  subject: string
  body: string
  category: TicketCategory
  status: string
  /** Staff and holder messages, oldest first (internal staff notes are never listed). */
  replies: ReplyView[]
  createdAt: string
  updatedAt: string
}

export function presentReply(reply: SupportTicketReply): ReplyView {
  return {
    id: reply.id,
    author: reply.authorKind,
    body: reply.body,
    createdAt: reply.createdAt.toUTC().toISO()!,
  }
}

export function presentTicket(ticket: SupportTicket, replies: SupportTicketReply[]): TicketView {
  return {
    id: ticket.id,
    subject: ticket.subject,
    body: ticket.body,
    category: ticket.category,
    status: ticket.status,
    replies: replies.map(presentReply),
    createdAt: ticket.createdAt.toUTC().toISO()!,
    updatedAt: ticket.updatedAt.toUTC().toISO()!,
  }
}

/** The public replies of these tickets, oldest first, grouped by ticket id. */
async function publicRepliesOf(ticketIds: string[]): Promise<Map<string, SupportTicketReply[]>> {
  const grouped = new Map<string, SupportTicketReply[]>(ticketIds.map((id) => [id, []]))
  if (ticketIds.length === 0) return grouped
  const replies = await SupportTicketReply.query()
    .whereIn('ticket_id', ticketIds)
    .where('internal', false)
    .orderBy('created_at', 'asc')
    .orderBy('id', 'asc')
  for (const reply of replies) grouped.get(reply.ticketId)!.push(reply)
  return grouped
}

export function announceTicketChange(change: TicketChange) {
  void emitter.emit(TICKET_CHANGED, change)
}

export async function openTicket(
  userId: string,
  input: { subject: string; body: string; category: TicketCategory }
): Promise<TicketView> {
  const ticket = await SupportTicket.create({ userId, ...input, status: 'open' })
  announceTicketChange({ ticketId: ticket.id, change: 'opened' })
  return presentTicket(ticket, [])
}

export async function ticketsOf(userId: string): Promise<TicketView[]> {
  const tickets = await SupportTicket.query()
    .where('user_id', userId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(LIST_LIMIT)
  const replies = await publicRepliesOf(tickets.map((ticket) => ticket.id))
  return tickets.map((ticket) => presentTicket(ticket, replies.get(ticket.id)!))
}

/**
 * The ticket with this id; 404 for unknown and malformed ids alike. The one
 * ticket lookup (holder routes and console): who may see or answer it is
 * TicketPolicy's answer.
 */
export async function findTicket(ticketId: string): Promise<SupportTicket> {
  const ticket = isUuid(ticketId) ? await SupportTicket.find(ticketId) : null
  if (!ticket) throw new NotFoundException('Ticket not found')
  return ticket
}

/** The holder's view of a ticket (found and authorized by the controller): public replies only. */
export async function ticketView(ticket: SupportTicket): Promise<TicketView> {
  const replies = await publicRepliesOf([ticket.id])
  return presentTicket(ticket, replies.get(ticket.id)!)
}

/** The holder answers: the ticket is open again (it waits for staff). */
export async function addHolderReply(ticket: SupportTicket, body: string): Promise<TicketView> {
  await db.transaction(async (trx) => {
    await SupportTicketReply.create(
      { ticketId: ticket.id, authorId: ticket.userId, authorKind: 'holder', body, internal: false },
      { client: trx }
    )
    ticket.useTransaction(trx)
    ticket.status = 'open'
    await ticket.save()
  })
  announceTicketChange({ ticketId: ticket.id, change: 'holder_reply' })
  return ticketView(ticket)
}
