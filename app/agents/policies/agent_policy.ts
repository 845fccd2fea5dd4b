import { AuthorizationResponse, BasePolicy } from '@adonisjs/bouncer'
import type { AuthorizerResponse } from '@adonisjs/bouncer/types'
import type Agent from '#agents/models/agent'
import type User from '#identity/models/user'
import { staffRole } from '#identity/services/staff_roles'

/**
 * The account a check is made for: a request's user, a WebSocket's, or the
 * one a logs token was issued to (only its id counts for an owner's action).
 */
type Account = Pick<User, 'id'>

/**
 * Another account's agent is 403 FORBIDDEN on every route (spec,
 * Authentication rule 6); an unknown id is findAgent's 404 before any check.
 */
function ownerOnly(account: Account, agent: Agent): AuthorizerResponse {
  return (
    agent.userId === account.id ||
    AuthorizationResponse.deny('This agent belongs to another account', 403)
  )
}

/**
 * Who may do what with an agent. The owner may do everything; staff act on
 * any agent from the console only. The owner's actions are one rule today,
 * kept apart so each can change on its own.
 */
export default class AgentPolicy extends BasePolicy {
  /** Detail, status, stats, monitoring, memory, feed, logs, files, versions, history, and the agent's skills, schedules, channels, knowledge and wallets. */
  view(account: Account, agent: Agent): AuthorizerResponse {
    return ownerOnly(account, agent)
  }

  /** PATCH, config restores, files, history, skills, schedules, channels, knowledge, wallets. */
  update(account: Account, agent: Agent): AuthorizerResponse {
    return ownerOnly(account, agent)
  }

  delete(account: Account, agent: Agent): AuthorizerResponse {
    return ownerOnly(account, agent)
  }

  /** Start, stop, restart. */
  operate(account: Account, agent: Agent): AuthorizerResponse {
    return ownerOnly(account, agent)
  }

  /** Chat over REST, SSE and the WebSocket, and the agent's webhook URL (a credential to chat). */
  chat(account: Account, agent: Agent): AuthorizerResponse {
    return ownerOnly(account, agent)
  }

  /** Research and token scans: the hosted model on the owner's credits, metered per agent. */
  useTools(account: Account, agent: Agent): AuthorizerResponse {
    return ownerOnly(account, agent)
  }

  /**
   * The logs, opened with a logs token instead of a credential: the account
   * the token was issued to must still own the agent. A refusal is the plain
   * 403 (FORBIDDEN's default message), as it always was for a token.
   */
  followLogsWithToken(holder: Account, agent: Agent): AuthorizerResponse {
    return agent.userId === holder.id
  }

  /** Console: start, stop, restart or put to sleep any account's agent. */
  operateAsStaff(staff: User, _agent: Agent): AuthorizerResponse {
    return staffRole(staff, 'operator')
  }

  /**
   * Console: restore one of the agent's backups from a support ticket, the
   * role of the lifecycle actions (a restore stops and restarts the
   * container and rewrites its state); a ticket acts on its holder's
   * agents only.
   */
  restoreBackupForTicket(
    staff: User,
    agent: Agent,
    ticket: { userId: string }
  ): AuthorizerResponse {
    const role = staffRole(staff, 'operator')
    if (role !== true) return role
    return (
      agent.userId === ticket.userId ||
      AuthorizationResponse.deny(
        "This agent is not the ticket holder's: a ticket restores its holder's agents only",
        403
      )
    )
  }
}
