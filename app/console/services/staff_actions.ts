import { DateTime } from 'luxon'
import { ForbiddenException } from '#core/exceptions/api_exceptions'
import type User from '#identity/models/user'
import type { Role } from '#identity/models/user'
import type Agent from '#agents/models/agent'
import { grantCredits } from '#credits/services/credits_service'
import { mailVerificationLink } from '#identity/services/account_service'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { activeAgentsOf } from '#agents/queries/console_agents'
import { findAccount } from '#identity/queries/console_accounts'
import type SupportTicket from '#support/models/support_ticket'
import type { TicketStatus } from '#support/models/support_ticket'
import { addStaffReply, assignTicket, setTicketStatus } from '#support/services/ticket_desk'
import { audit } from '#console/services/audit_service'
import { setPlanByStaff } from '#billing/services/staff_plan'
import { findBackup, restoreBackup } from '#backups/services/backup_service'
import type { TierKey } from '#config/plans'
import { atLeast } from '#identity/services/staff_roles'

/**
 * Every staff action the console offers, each writing an audit entry. The
 * controller finds the target and authorizes the actor first (AccountPolicy,
 * AgentPolicy, TicketPolicy: not only the page that shows its button, so a
 * forged form meets the same check).
 */
export async function grantAsStaff(actor: User, target: User, credits: number, reason: string) {
  const before = { aiCreditsBalance: target.aiCreditsBalance }
  const grant = await grantCredits(actor, { userId: target.id, credits, reason })
  await audit(actor, {
    action: 'account.grant_credits',
    targetType: 'account',
    targetId: target.id,
    before,
    after: { aiCreditsBalance: grant.balance, credits, reason },
  })
  return grant
}

export async function setRoleAsStaff(actor: User, target: User, role: Role) {
  const before = { role: target.role }
  target.role = role
  await target.save()
  await audit(actor, {
    action: 'account.set_role',
    targetType: 'account',
    targetId: target.id,
    before,
    after: { role },
  })
}

export async function resendVerificationAsStaff(actor: User, target: User) {
  if (target.isVerified) return false
  await mailVerificationLink(target)
  await audit(actor, {
    action: 'account.resend_verification',
    targetType: 'account',
    targetId: target.id,
  })
  return true
}

/**
 * Disabling locks every credential at once (the auth layer rejects a
 * disabled account's JWTs, keys and refresh tokens) and stops its agents.
 */
export async function setDisabledAsStaff(actor: User, target: User, disabled: boolean) {
  const before = { disabledAt: target.disabledAt?.toISO() ?? null }
  target.disabledAt = disabled ? DateTime.now() : null
  await target.save()
  if (disabled) {
    for (const agent of await activeAgentsOf(target.id)) await agentLifecycle.stop(agent)
  }
  await audit(actor, {
    action: disabled ? 'account.disable' : 'account.enable',
    targetType: 'account',
    targetId: target.id,
    before,
    after: { disabledAt: target.disabledAt?.toISO() ?? null },
  })
}

/** The account's plan without a payment (operators; reason kept in the audit trail). */
export async function setPlanAsStaff(
  actor: User,
  target: User,
  input: { tier: TierKey; until: DateTime | null; reason: string }
) {
  const { before, after } = await setPlanByStaff(target.id, input.tier, input.until)
  await audit(actor, {
    action: 'account.set_plan',
    targetType: 'account',
    targetId: target.id,
    before,
    after: { ...after, reason: input.reason },
  })
  return after
}

export type AgentAction = 'start' | 'stop' | 'restart' | 'sleep'

/**
 * The lifecycle actions that apply to an agent in a container state (the
 * `container` field): no Start on a running agent, no Sleep on a stopped one.
 */
export function agentActionsFor(container: string): AgentAction[] {
  switch (container) {
    case 'running':
      return ['stop', 'restart', 'sleep']
    case 'starting':
    case 'queued':
      return ['stop']
    case 'sleeping':
      return ['start', 'stop']
    case 'error':
      return ['start', 'restart']
    case 'stopped':
      return ['start']
    default:
      return ['start', 'stop', 'restart', 'sleep']
  }
}

/** Sleep: the container stops to free memory, the agent stays `active` and wakes on a message. */
async function sleepAgent(agent: { id: string }) {
  await agentLifecycle.sleep(agent.id)
  return { status: 'asleep' }
}

export async function agentActionAsStaff(actor: User, agent: Agent, action: AgentAction) {
  const before = { status: agent.status }
  const result =
    action === 'start'
      ? await agentLifecycle.start(agent)
      : action === 'stop'
        ? await agentLifecycle.stop(agent)
        : action === 'sleep'
          ? await sleepAgent(agent)
          : await agentLifecycle.restart(agent)
  await audit(actor, {
    action: `agent.${action}`,
    targetType: 'agent',
    targetId: agent.id,
    before,
    after: { ...result },
  })
  return result
}

/**
 * Restores one of `agent`'s backups for the holder of `ticket` (the
 * controller made sure the agent is theirs) through the backups service,
 * which saves the current state first as a pre-restore backup; then the
 * audit entry and an internal note on the ticket say what was restored and
 * where the state before went. An unknown backup, or one of another agent,
 * is findBackup's 404 before anything changes.
 */
export async function restoreBackupAsStaff(
  actor: User,
  ticket: SupportTicket,
  agent: Agent,
  backupId: string
) {
  const backup = await findBackup(agent.id, backupId)
  const { preRestoreBackup } = await restoreBackup(agent, backup.id)
  await audit(actor, {
    action: 'agent.restore_backup',
    targetType: 'agent',
    targetId: agent.id,
    after: { restoredFrom: backup.id, preRestoreBackup: preRestoreBackup.id, ticketId: ticket.id },
  })
  await addStaffReply(
    actor,
    ticket,
    `Restored agent "${agent.name}" (${agent.id}) to its ${backup.kind} backup ${backup.id} ` +
      `of ${backup.createdAt}. Its state before was saved as pre-restore backup ${preRestoreBackup.id}.`,
    true
  )
  return { backup, preRestoreBackup }
}

export async function replyAsStaff(
  actor: User,
  ticket: SupportTicket,
  body: string,
  internal: boolean
) {
  const before = { status: ticket.status }
  await addStaffReply(actor, ticket, body, internal)
  await audit(actor, {
    action: internal ? 'ticket.note' : 'ticket.reply',
    targetType: 'ticket',
    targetId: ticket.id,
    before,
    after: { status: ticket.status },
  })
}

export async function setTicketStatusAsStaff(
  actor: User,
  ticket: SupportTicket,
  status: TicketStatus
) {
  const before = { status: ticket.status }
  await setTicketStatus(ticket, status)
  await audit(actor, {
    action: 'ticket.status',
    targetType: 'ticket',
    targetId: ticket.id,
    before,
    after: { status },
  })
}

export async function assignTicketAsStaff(
  actor: User,
  ticket: SupportTicket,
  assigneeId: string | null
) {
  if (assigneeId) {
    const assignee = await findAccount(assigneeId)
    if (!atLeast(assignee.role, 'support')) throw new ForbiddenException('Tickets go to staff only')
  }
  const before = { assignedToId: ticket.assignedToId }
  await assignTicket(ticket, assigneeId)
  await audit(actor, {
    action: 'ticket.assign',
    targetType: 'ticket',
    targetId: ticket.id,
    before,
    after: { assignedToId: assigneeId },
  })
}
