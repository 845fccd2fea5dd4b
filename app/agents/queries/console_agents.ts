import db from '@adonisjs/lucid/services/db'
import { likePrefix, newestFirstPage, type Page } from '#core/database/list_pages'
import Agent, { type AgentStatus } from '#agents/models/agent'
import { isUuid } from '#core/http/ids'

/**
 * Agents as the staff console reads them (docs/console.md): the search list,
 * an account's agents, and the counts of the overview. One agent is
 * `findAgent` (agent_access.ts).
 */
export interface AgentListRow {
  id: string
  name: string
  slug: string
  framework: string
  status: AgentStatus
  message_count: number
  created_at: Date
  owner_email: string
}

/**
 * Newest first; `search` is an agent or owner id, or a prefix of the name,
 * the slug or the owner's e-mail (joined here so one indexed query pages).
 */
export async function agentsPage(
  search: string | undefined,
  page: number,
  size: number
): Promise<Page<AgentListRow>> {
  const query = db
    .from('agents as a')
    .join('users as u', 'u.id', 'a.user_id')
    .select(
      'a.id',
      'a.name',
      'a.slug',
      'a.framework',
      'a.status',
      'a.message_count',
      'a.created_at',
      'u.email as owner_email'
    )
  const term = search?.trim()
  if (term) {
    if (isUuid(term)) query.where((q) => q.where('a.id', term).orWhere('a.user_id', term))
    else {
      const prefix = likePrefix(term)
      query.where((q) =>
        q
          .whereRaw('lower(a.name) like ?', [prefix])
          .orWhere('a.slug', 'like', prefix)
          .orWhereRaw('lower(u.email) like ?', [prefix])
      )
    }
  }
  return newestFirstPage(query, page, size, { createdAt: 'a.created_at', id: 'a.id' })
}

/** An account's agents, newest first (the first 50). */
export async function agentsOfAccount(userId: string) {
  return db
    .from('agents')
    .where('user_id', userId)
    .orderBy('created_at', 'desc')
    .limit(50)
    .select('id', 'name', 'slug', 'framework', 'status', 'created_at')
}

/** An account's agents that are `active` (what disabling the account stops). */
export async function activeAgentsOf(userId: string): Promise<Agent[]> {
  return Agent.query().where('user_id', userId).where('status', 'active')
}

/** How many agents hold each stored status (statuses without agents are absent). */
export async function agentCountsByStatus(): Promise<Record<string, number>> {
  const rows = await db.from('agents').select('status').count('* as n').groupBy('status')
  const counts: Record<string, number> = {}
  for (const row of rows) counts[row.status] = Number(row.n)
  return counts
}

/**
 * The container states the database knows (the running, starting and
 * queued ones are the runtime's): sleeping (active and put to sleep),
 * stopped (stopped or paused) and error.
 */
export async function storedContainerStates(): Promise<{
  sleeping: number
  stopped: number
  error: number
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
  const counts = { sleeping: Number(sleeping?.n ?? 0), stopped: 0, error: 0 }
  for (const row of states) counts[row.status === 'error' ? 'error' : 'stopped'] += Number(row.n)
  return counts
}
