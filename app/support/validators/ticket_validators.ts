import vine from '@vinejs/vine'
import { ticketCategories } from '#support/models/support_ticket'

export const createTicketValidator = vine.create({
  subject: vine.string().trim().minLength(3).maxLength(200),
  body: vine.string().trim().minLength(1).maxLength(10_000),
  category: vine.enum(ticketCategories),
})

/** A reply in a ticket's thread, from the holder or from staff. */
export const ticketReplyValidator = vine.create({
  body: vine.string().trim().minLength(1).maxLength(10_000),
})
