import os from 'node:os'
import app from '@adonisjs/core/services/app'
import { accountCount } from '#identity/queries/console_accounts'
import { agentCountsByStatus, storedContainerStates } from '#agents/queries/console_agents'
import { llmCreditsSpentSince } from '#credits/services/credit_ledger'
import { revenueSince } from '#billing/queries/console_payments'
import { ticketCounts } from '#support/services/ticket_desk'
import { requestCounter } from '#core/http/request_counter'

/**
 * The overview's figures, each from one aggregate query of the area that
 * owns the table. Container states come from the runtime (what this host
 * knows); stored agent states from the agents area.
 */
export async function overviewFigures() {
  const since = new Date(Date.now() - 60 * 60 * 1000)
  const today = new Date()
  today.setUTCHours(0, 0, 0, 0)
  const monthStart = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1))

  const [accounts, statuses, creditsSpentToday, revenueThisMonthUsd, tickets, containers] =
    await Promise.all([
      accountCount(),
      agentCountsByStatus(),
      llmCreditsSpentSince(today),
      revenueSince(monthStart),
      ticketCounts(),
      containerStates(),
    ])

  return {
    accounts,
    agents: Object.values(statuses).reduce((a, b) => a + b, 0),
    agentStatuses: statuses,
    containers: containers.states,
    capacity: containers.capacity,
    creditsSpentToday,
    revenueThisMonthUsd,
    openTickets: tickets.open,
    waitingTickets: tickets.waiting,
    requestsLastHour: requestCounter.since(since),
    host: {
      memoryTotalMb: Math.round(os.totalmem() / 1048576),
      memoryFreeMb: Math.round(os.freemem() / 1048576),
      load: os.loadavg()[0],
      cores: os.availableParallelism(),
    },
  }
}

/**
 * Agents by container state: running, starting and queued from this
 * host's capacity book (all its instances); sleeping, stopped and error from the stored
 * states (the agents area's `storedContainerStates`).
 */
async function containerStates(): Promise<{
  states: Record<string, number>
  capacity: { reservedMb: number; memoryBudgetMb: number; bootConcurrency: number } | null
}> {
  const counts: Record<string, number> = await storedContainerStates()
  try {
    const runtime: any = await app.container.make('runtime')
    // The host's book: every instance of the host counts.
    const snapshot = await runtime.hostCapacity()
    counts.running = snapshot.running
    counts.starting = snapshot.booting
    counts.queued = snapshot.queued
    return {
      states: counts,
      capacity: {
        reservedMb: snapshot.reservedMb,
        memoryBudgetMb: Number.isFinite(snapshot.memoryBudgetMb) ? snapshot.memoryBudgetMb : 0,
        bootConcurrency: Number.isFinite(snapshot.bootConcurrency) ? snapshot.bootConcurrency : 0,
      },
    }
  } catch {
    return { states: counts, capacity: null }
  }
}
