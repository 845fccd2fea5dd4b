import os from 'node:os'
import app from '@adonisjs/core/services/app'
import db from '@adonisjs/lucid/services/db'
import { ticketCounts } from '#support/services/ticket_desk'
import { requestCounter } from '#core/http/request_counter'

/**
 * The overview's figures, each from one aggregate query. Container states
 * come from the runtime (what this host knows); stored agent states from
 * the database.
 */
export async function overviewFigures() {
  const since = new Date(Date.now() - 60 * 60 * 1000)
  const today = new Date()
  today.setUTCHours(0, 0, 0, 0)
  const monthStart = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1))

  const [accounts, agentStates, creditsToday, revenue, tickets, containers] = await Promise.all([
    db.from('users').count('* as n').first(),
    db.from('agents').select('status').count('* as n').groupBy('status'),
    db
      .from('credit_ledger')
      .where('kind', 'llm')
      .where('created_at', '>=', today)
      .sum('credits as spent')
      .first(),
    db
      .from('payments')
      .where('status', 'completed')
      .where('created_at', '>=', monthStart)
      .sum('usd_value as usd')
      .first(),
    ticketCounts(),
    containerStates(),
  ])

  const statuses: Record<string, number> = {}
  for (const row of agentStates) statuses[row.status] = Number(row.n)

  return {
    accounts: Number(accounts?.n ?? 0),
    agents: Object.values(statuses).reduce((a, b) => a + b, 0),
    agentStatuses: statuses,
    containers: containers.states,
    capacity: containers.capacity,
    creditsSpentToday: Math.abs(Number(creditsToday?.spent ?? 0)),
    revenueThisMonthUsd: Number(revenue?.usd ?? 0),
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
 * host's capacity manager; sleeping, stopped and error from the stored
 * states (sleeping: active and put to sleep).
 */
async function containerStates(): Promise<{
  states: Record<string, number>
  capacity: { reservedMb: number; memoryBudgetMb: number; bootConcurrency: number } | null
}> {
  const [sleeping, states] = await Promise.all([
    db
      .from('agents')
      .where('status', 'active')
      .whereNotNull('sleeping_since')
      .count('* as n')
      .first(),
    db
      .from('agents')
      .whereIn('status', ['stopped', 'paused', 'error'])
      .select('status')
      .count('* as n')
      .groupBy('status'),
  ])
  const counts: Record<string, number> = {
    sleeping: Number(sleeping?.n ?? 0),
    stopped: 0,
    error: 0,
  }
  for (const row of states) counts[row.status === 'error' ? 'error' : 'stopped'] += Number(row.n)
  try {
    const runtime: any = await app.container.make('runtime')
    const snapshot = runtime.capacity()
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
