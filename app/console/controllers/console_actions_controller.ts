import { DateTime } from 'luxon'
import type { HttpContext } from '@adonisjs/core/http'
import AgentPolicy from '#agents/policies/agent_policy'
import { findAgent } from '#agents/services/agent_access'
import TicketPolicy from '#support/policies/ticket_policy'
import { findTicket } from '#support/services/ticket_service'
import AccountPolicy from '#identity/policies/account_policy'
import { findAccount } from '#identity/queries/console_accounts'
import {
  agentActionAsStaff,
  assignTicketAsStaff,
  grantAsStaff,
  replyAsStaff,
  resendVerificationAsStaff,
  restoreBackupAsStaff,
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
  restoreBackupValidator,
  roleValidator,
  staffReplyValidator,
  ticketStatusValidator,
} from '#console/validators/console_validators'
import { utc } from '#console/services/view_helpers'

/**
 * Form posts of the console. Each one is CSRF-checked (shield), authorized
 * here for the signed-in staff member (the policies, after the route
 * group's role gate) and audited in its service (staff_actions); the answer
 * is a redirect back to the page with a notice (post/redirect/get).
 */
export default class ConsoleActionsController {
  async grant({ bouncer, staff, params, request, response, session }: HttpContext) {
    const { credits, reason } = await request.validateUsing(grantValidator)
    await bouncer.with(AccountPolicy).authorize('grantCredits')
    const grant = await grantAsStaff(staff, await findAccount(params.id), credits, reason)
    session.flash('notice', `Granted ${credits} AI Credits; balance now ${grant.balance}`)
    return response.redirect(`/console/accounts/${params.id}`)
  }

  async setRole({ bouncer, staff, params, request, response, session }: HttpContext) {
    const { role } = await request.validateUsing(roleValidator)
    const target = await findAccount(params.id)
    await bouncer.with(AccountPolicy).authorize('setRole', target)
    await setRoleAsStaff(staff, target, role)
    session.flash('notice', `Role set to ${role}`)
    return response.redirect(`/console/accounts/${params.id}`)
  }

  async setPlan({ bouncer, staff, params, request, response, session }: HttpContext) {
    const { tier, until, reason } = await request.validateUsing(planValidator)
    const target = await findAccount(params.id)
    await bouncer.with(AccountPolicy).authorize('setPlan', target)
    const plan = await setPlanAsStaff(staff, target, {
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

  async resendVerification({ bouncer, staff, params, response, session }: HttpContext) {
    const target = await findAccount(params.id)
    await bouncer.with(AccountPolicy).authorize('resendVerification', target)
    const sent = await resendVerificationAsStaff(staff, target)
    session.flash('notice', sent ? 'Verification mail sent' : 'The address is already verified')
    return response.redirect(`/console/accounts/${params.id}`)
  }

  async disable({ bouncer, staff, params, response, session }: HttpContext) {
    const target = await findAccount(params.id)
    await bouncer.with(AccountPolicy).authorize('setDisabled', target)
    await setDisabledAsStaff(staff, target, true)
    session.flash(
      'notice',
      'Account disabled: its credentials no longer work and its agents were stopped'
    )
    return response.redirect(`/console/accounts/${params.id}`)
  }

  async enable({ bouncer, staff, params, response, session }: HttpContext) {
    const target = await findAccount(params.id)
    await bouncer.with(AccountPolicy).authorize('setDisabled', target)
    await setDisabledAsStaff(staff, target, false)
    session.flash('notice', 'Account enabled')
    return response.redirect(`/console/accounts/${params.id}`)
  }

  async agentAction({ bouncer, staff, params, response, session }: HttpContext) {
    const action = params.action as AgentAction
    const agent = await findAgent(params.id)
    await bouncer.with(AgentPolicy).authorize('operateAsStaff', agent)
    const result = await agentActionAsStaff(staff, agent, action)
    session.flash('notice', `Agent ${result.status}`)
    return response.redirect(`/console/agents/${params.id}`)
  }

  /** From a ticket: one of its holder's agents back to one of its backups (operators). */
  async restoreBackup({ bouncer, staff, params, request, response, session }: HttpContext) {
    const { agentId, backupId } = await request.validateUsing(restoreBackupValidator)
    const ticket = await findTicket(params.id)
    const agent = await findAgent(agentId)
    await bouncer.with(AgentPolicy).authorize('restoreBackupForTicket', agent, ticket)
    const { backup, preRestoreBackup } = await restoreBackupAsStaff(staff, ticket, agent, backupId)
    session.flash(
      'notice',
      `${agent.name} restored to its ${backup.kind} backup of ${utc(backup.createdAt)}; ` +
        `its state before is kept as a pre-restore backup (${preRestoreBackup.id})`
    )
    return response.redirect(`/console/support/${params.id}`)
  }

  async reply({ bouncer, staff, params, request, response, session }: HttpContext) {
    const { body, internal = false } = await request.validateUsing(staffReplyValidator)
    const ticket = await findTicket(params.id)
    await bouncer.with(TicketPolicy).authorize('replyAsStaff', ticket)
    await replyAsStaff(staff, ticket, body, internal)
    session.flash('notice', internal ? 'Internal note added' : 'Reply sent to the account holder')
    return response.redirect(`/console/support/${params.id}`)
  }

  async setStatus({ bouncer, staff, params, request, response, session }: HttpContext) {
    const { status } = await request.validateUsing(ticketStatusValidator)
    const ticket = await findTicket(params.id)
    await bouncer.with(TicketPolicy).authorize('setStatus', ticket)
    await setTicketStatusAsStaff(staff, ticket, status)
    session.flash('notice', `Ticket ${status === 'closed' ? 'closed' : `set to ${status}`}`)
    return response.redirect(`/console/support/${params.id}`)
  }

  async assign({ bouncer, staff, params, request, response, session }: HttpContext) {
    const { assigneeId } = await request.validateUsing(assignValidator)
    const ticket = await findTicket(params.id)
    await bouncer.with(TicketPolicy).authorize('assign', ticket)
    await assignTicketAsStaff(staff, ticket, assigneeId ?? null)
    session.flash('notice', assigneeId ? 'Ticket assigned' : 'Ticket unassigned')
    return response.redirect(`/console/support/${params.id}`)
  }
}
