import { AuthorizationResponse, BasePolicy } from '@adonisjs/bouncer'
import type { AuthorizerResponse } from '@adonisjs/bouncer/types'
import type User from '#identity/models/user'
import type SupportTicket from '#support/models/support_ticket'
import { staffRole } from '#identity/services/staff_roles'

/** Another account's ticket answers like an unknown one (404), so ticket ids do not leak. */
function holderOnly(user: Pick<User, 'id'>, ticket: SupportTicket): AuthorizerResponse {
  return ticket.userId === user.id || AuthorizationResponse.deny('Ticket not found', 404)
}

/**
 * Who may do what with a support ticket: its holder on the API (staff
 * included: their own tickets only there), support staff and above in the
 * console, for any account's ticket.
 */
export default class TicketPolicy extends BasePolicy {
  view(user: Pick<User, 'id'>, ticket: SupportTicket): AuthorizerResponse {
    return holderOnly(user, ticket)
  }

  reply(user: Pick<User, 'id'>, ticket: SupportTicket): AuthorizerResponse {
    return holderOnly(user, ticket)
  }

  /** A reply to the holder or an internal note. */
  replyAsStaff(staff: User, _ticket: SupportTicket): AuthorizerResponse {
    return staffRole(staff, 'support')
  }

  setStatus(staff: User, _ticket: SupportTicket): AuthorizerResponse {
    return staffRole(staff, 'support')
  }

  assign(staff: User, _ticket: SupportTicket): AuthorizerResponse {
    return staffRole(staff, 'support')
  }
}
