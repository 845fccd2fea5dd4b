import app from '@adonisjs/core/services/app'
import {
  findAccount,
  accountLinkOf,
  enabledAccountsWithRoles,
} from '#identity/queries/console_accounts'
import { listApiKeys } from '#identity/services/api_key_service'
import { latestNotificationsOf } from '#identity/services/notification_service'
import { agentsOfAccount } from '#agents/queries/console_agents'
import { findAgent } from '#agents/services/agent_access'
import { containerOf } from '#agents/services/agent_views'
import { maskSecrets } from '#agents/services/config_secrets'
import { feedOf } from '#agents/services/feed_service'
import { entriesOf } from '#credits/services/credit_ledger'
import { budgetsOfAgent } from '#credits/queries/console_budgets'
import { backupsOfAccountAgents, latestBackupsOf } from '#backups/queries/console_backups'
import { paymentsOfAccount } from '#billing/queries/console_payments'
import { ticketForStaff, ticketsOfAccount } from '#support/services/ticket_desk'
import { schedulesOfAgent } from '#schedules/services/schedule_service'
import { channelStatesOf } from '#channels/services/channel_rows'
import { phaseOf } from '#runtime/boot_phases'
import { agentActionsFor } from '#console/services/staff_actions'
import { staffRoles } from '#identity/services/staff_roles'

/**
 * What the console's detail pages show, each piece read through the area
 * that owns it (docs/console.md, "Where the data comes from"). The lists
 * are the areas' own paged queries, called by the pages controller.
 */

/** Rows a console list shows per page. */
export const CONSOLE_PAGE_SIZE = 25

export async function accountDetail(userId: string) {
  const user = await findAccount(userId)
  const [ledger, agents, payments, tickets, apiKeys, notifications] = await Promise.all([
    entriesOf(user.id, 20),
    agentsOfAccount(user.id),
    paymentsOfAccount(user.id),
    ticketsOfAccount(user.id),
    // Only the display prefix of a key is ever shown, never its hash.
    listApiKeys(user),
    latestNotificationsOf(user.id, 10),
  ])
  return { user, ledger, agents, payments, tickets, apiKeys, notifications }
}

export async function agentDetail(agentId: string) {
  const agent = await findAgent(agentId)
  const runtime: any = await app.container.make('runtime')
  const [
    owner,
    feed,
    container,
    logs,
    monitoring,
    schedules,
    channels,
    containerField,
    backups,
    budgets,
  ] = await Promise.all([
    accountLinkOf(agent.userId),
    feedOf(agent.id, 20),
    runtime.status(agent.id).catch(() => null),
    runtime.logs(agent.id, { tail: 50 }).catch(() => ''),
    agentMonitoring(agent.id),
    schedulesOfAgent(agent.id),
    channelStatesOf(agent.id),
    containerOf(agent).catch(() => 'unknown'),
    latestBackupsOf(agent.id),
    budgetsOfAgent(agent.id),
  ])
  return {
    agent,
    owner,
    feed,
    container,
    logs,
    monitoring,
    schedules,
    channels,
    backups,
    budgets,
    containerField,
    actions: agentActionsFor(containerField),
    phase: phaseOf(agent.id, containerField),
    config: JSON.stringify(maskSecrets(agent.config as Record<string, unknown>), null, 2),
  }
}

/**
 * A ticket with its thread and the staff it can be assigned to; for those
 * who may restore (`withBackups`: operators), its holder's agents' backups.
 */
export async function ticketDetail(ticketId: string, options: { withBackups: boolean }) {
  const [ticket, staffMembers] = await Promise.all([
    ticketForStaff(ticketId),
    enabledAccountsWithRoles(staffRoles),
  ])
  const restorable = options.withBackups ? await backupsOfAccountAgents(ticket.ticket.userId) : []
  return { ...ticket, staffMembers, restorable }
}

/** An agent's live figures; a stopped or sleeping agent shows zeros, not an error. */
export async function agentMonitoring(agentId: string): Promise<Record<string, unknown>> {
  const runtime: any = await app.container.make('runtime')
  try {
    return await runtime.monitoring(agentId)
  } catch {
    return {
      cpuPercent: 0,
      memoryMb: 0,
      memoryLimitMb: null,
      restartCount: 0,
      status: 'not running',
    }
  }
}
