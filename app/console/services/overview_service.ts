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
    containers,
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

/** Container states on this host, counted (the runtime's own view). */
async function containerStates(): Promise<Record<string, number>> {
  try {
    const runtime: any = await app.container.make('runtime')
    if (typeof runtime.stateCounts === 'function') return await runtime.stateCounts()
  } catch {}
  return {}
}
