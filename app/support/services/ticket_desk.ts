import db from '@adonisjs/lucid/services/db'
import { likePrefix } from '#core/database/list_pages'
import User from '#identity/models/user'
import { sendMailInBackground } from '#identity/services/mailer'
import { notify } from '#identity/services/notification_service'
import type SupportTicket from '#support/models/support_ticket'
import { type TicketStatus } from '#support/models/support_ticket'
import SupportTicketReply from '#support/models/support_ticket_reply'
import { staffReplyMail } from '#support/mails/ticket_mails'
import { announceTicketChange, findTicket } from '#support/services/ticket_service'

/**
 * The staff side of support (the console calls it): the queue, a ticket
 * with its whole thread (internal notes included), replies that reach the
 * holder by notification and mail, assignment and status changes.
 */
export const QUEUE_PAGE_SIZE = 25

export interface QueueFilter {
  status: TicketStatus
  search?: string
  page: number
}

export async function ticketQueue(filter: QueueFilter) {
  const query = db
    .from('support_tickets as t')
    .join('users as u', 'u.id', 't.user_id')
    .leftJoin('users as a', 'a.id', 't.assigned_to_id')
    .where('t.status', filter.status)
    .select(
      't.id',
      't.subject',
      't.category',
      't.status',
      't.created_at',
      't.updated_at',
      'u.email as holder_email',
      'a.email as assignee_email'
    )
  if (filter.search) {
    const prefix = likePrefix(filter.search)
    query.where((q) =>
      q
        .whereRaw('lower(u.email) like ?', [prefix])
        .orWhereRaw('lower(t.subject) like ?', [`%${prefix}`])
    )
  }
  const rows = await query
    .orderBy('t.created_at', filter.status === 'closed' ? 'desc' : 'asc')
    .orderBy('t.id')
    .offset((filter.page - 1) * QUEUE_PAGE_SIZE)
    .limit(QUEUE_PAGE_SIZE + 1)
  return { tickets: rows.slice(0, QUEUE_PAGE_SIZE), hasMore: rows.length > QUEUE_PAGE_SIZE }
}

export async function ticketCounts(): Promise<Record<TicketStatus, number>> {
  const rows = await db.from('support_tickets').select('status').count('* as n').groupBy('status')
  const counts: Record<TicketStatus, number> = { open: 0, waiting: 0, closed: 0 }
  for (const row of rows) {
    if (row.status in counts) counts[row.status as TicketStatus] = Number(row.n)
  }
  return counts
}

/** An account's tickets, newest first (the latest 20). */
export async function ticketsOfAccount(userId: string) {
  return db
    .from('support_tickets')
    .where('user_id', userId)
    .orderBy('created_at', 'desc')
    .limit(20)
    .select('id', 'subject', 'status', 'created_at')
}

export async function ticketForStaff(ticketId: string) {
  const ticket = await findTicket(ticketId)
  const [holder, assignee, thread] = await Promise.all([
    User.find(ticket.userId),
    ticket.assignedToId ? User.find(ticket.assignedToId) : null,
    db
      .from('support_ticket_replies as r')
      .leftJoin('users as u', 'u.id', 'r.author_id')
      .where('r.ticket_id', ticket.id)
      .orderBy('r.created_at', 'asc')
      .orderBy('r.id')
      .select(
        'r.id',
        'r.author_kind',
        'r.body',
        'r.internal',
        'r.created_at',
        'u.email as author_email'
      ),
  ])
  return { ticket, holder, assignee, thread }
}

/**
 * A staff message. A reply goes to the holder (notification + mail) and
 * the ticket then waits for them; an internal note is seen by staff only.
 */
export async function addStaffReply(
  staff: User,
  ticket: SupportTicket,
  body: string,
  internal: boolean
): Promise<SupportTicketReply> {
  const reply = await db.transaction(async (trx) => {
    const created = await SupportTicketReply.create(
      { ticketId: ticket.id, authorId: staff.id, authorKind: 'staff', body, internal },
      { client: trx }
    )
    if (!internal) {
      ticket.useTransaction(trx)
      ticket.status = 'waiting'
      await ticket.save()
      await notify(
        ticket.userId,
        { type: 'support_reply', title: `Support answered: ${ticket.subject}`, body },
        { trx }
      )
    }
    return created
  })
  if (!internal) {
    const holder = await User.find(ticket.userId)
    if (holder) void sendMailInBackground(staffReplyMail(holder.email, ticket.subject, body))
  }
  announceTicketChange({ ticketId: ticket.id, change: internal ? 'note' : 'staff_reply' })
  return reply
}

export async function setTicketStatus(ticket: SupportTicket, status: TicketStatus) {
  ticket.status = status
  await ticket.save()
  announceTicketChange({ ticketId: ticket.id, change: 'status' })
}

export async function assignTicket(ticket: SupportTicket, assigneeId: string | null) {
  ticket.assignedToId = assigneeId
  await ticket.save()
  announceTicketChange({ ticketId: ticket.id, change: 'assigned' })
}
