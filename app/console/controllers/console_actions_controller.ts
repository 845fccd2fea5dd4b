import { DateTime } from 'luxon'
import type { HttpContext } from '@adonisjs/core/http'
import {
  agentActionAsStaff,
  assignTicketAsStaff,
  grantAsStaff,
  replyAsStaff,
  resendVerificationAsStaff,
  setDisabledAsStaff,
  setPlanAsStaff,
  setRoleAsStaff,
  setTicketStatusAsStaff,
  type AgentAction,
} from '#console/services/staff_actions'
import {
  assignValidator,
  grantValidator,
  planValidator,
  roleValidator,
  staffReplyValidator,
  ticketStatusValidator,
} from '#console/validators/console_validators'

/**
 * Form posts of the console. Each one is CSRF-checked (shield), role-checked
 * in its service (staff_actions) and audited there; the answer is a
 * redirect back to the page with a notice (post/redirect/get).
 */
export default class ConsoleActionsController {
  async grant({ staff, params, request, response, session }: HttpContext) {
    const { credits, reason } = await request.validateUsing(grantValidator)
    const grant = await grantAsStaff(staff, params.id, credits, reason)
    session.flash('notice', `Granted ${credits} AI Credits; balance now ${grant.balance}`)
    return response.redirect(`/console/accounts/${params.id}`)
  }

  async setRole({ staff, params, request, response, session }: HttpContext) {
    const { role } = await request.validateUsing(roleValidator)
    await setRoleAsStaff(staff, params.id, role)
    session.flash('notice', `Role set to ${role}`)
    return response.redirect(`/console/accounts/${params.id}`)
  }

  async setPlan({ staff, params, request, response, session }: HttpContext) {
    const { tier, until, reason } = await request.validateUsing(planValidator)
    const plan = await setPlanAsStaff(staff, params.id, {
      tier,
      // The whole last day counts: the plan ends at its close (UTC).
      until: until ? DateTime.fromJSDate(until, { zone: 'utc' }).endOf('day') : null,
      reason,
    })
    session.flash(
      'notice',
      `Plan set to ${tier}${plan.subscriptionExpiresAt ? ` until ${plan.subscriptionExpiresAt.slice(0, 10)}` : ''}`
    )
    return response.redirect(`/console/accounts/${params.id}`)
  }

  async resendVerification({ staff, params, response, session }: HttpContext) {
    const sent = await resendVerificationAsStaff(staff, params.id)
    session.flash('notice', sent ? 'Verification mail sent' : 'The address is already verified')
    return response.redirect(`/console/accounts/${params.id}`)
  }

  async disable({ staff, params, response, session }: HttpContext) {
    await setDisabledAsStaff(staff, params.id, true)
    session.flash(
      'notice',
      'Account disabled: its credentials no longer work and its agents were stopped'
    )
    return response.redirect(`/console/accounts/${params.id}`)
  }

  async enable({ staff, params, response, session }: HttpContext) {
    await setDisabledAsStaff(staff, params.id, false)
    session.flash('notice', 'Account enabled')
    return response.redirect(`/console/accounts/${params.id}`)
  }

  async agentAction({ staff, params, response, session }: HttpContext) {
    const action = params.action as AgentAction
    const result = await agentActionAsStaff(staff, params.id, action)
    session.flash('notice', `Agent ${result.status}`)
    return response.redirect(`/console/agents/${params.id}`)
  }

  async reply({ staff, params, request, response, session }: HttpContext) {
    const { body, internal = false } = await request.validateUsing(staffReplyValidator)
    await replyAsStaff(staff, params.id, body, internal)
    session.flash('notice', internal ? 'Internal note added' : 'Reply sent to the account holder')
    return response.redirect(`/console/support/${params.id}`)
  }

  async setStatus({ staff, params, request, response, session }: HttpContext) {
    const { status } = await request.validateUsing(ticketStatusValidator)
    await setTicketStatusAsStaff(staff, params.id, status)
    session.flash('notice', `Ticket ${status === 'closed' ? 'closed' : `set to ${status}`}`)
    return response.redirect(`/console/support/${params.id}`)
  }

  async assign({ staff, params, request, response, session }: HttpContext) {
    const { assigneeId } = await request.validateUsing(assignValidator)
    await assignTicketAsStaff(staff, params.id, assigneeId ?? null)
    session.flash('notice', assigneeId ? 'Ticket assigned' : 'Ticket unassigned')
    return response.redirect(`/console/support/${params.id}`)
  }
}
