import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import { ForbiddenException, NotFoundException } from '#core/exceptions/api_exceptions'
import Agent from '#agents/models/agent'
import { preparedQuery } from '#core/database/prepared_query'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value)
}

let selectById: string | undefined

function findAgentSql(): string {
  if (!selectById) {
    Agent.boot()
    const columns = [...Agent.$columnsDefinitions.values()].map(
      (column) => `"${column.columnName}"`
    )
    selectById = `select ${columns.join(', ')} from agents where id = $1`
  }
  return selectById
}

/** The agent with this id; 404 for unknown and malformed ids alike. */
export async function findAgent(
  id: unknown,
  options: { trx?: TransactionClientContract; forUpdate?: boolean } = {}
): Promise<Agent> {
  if (!isUuid(id)) throw new NotFoundException('Agent not found')
  let agent: Agent | null
  if (options.trx || options.forUpdate) {
    const query = Agent.query({ client: options.trx }).where('id', id.toLowerCase())
    if (options.forUpdate) query.forUpdate()
    agent = await query.first()
  } else {
    // The plain read of every agent route (and of each chat): a prepared
    // statement, without the query builder's per-call work. The model's
    // columns are named (not `*`), so a column added by a later migration
    // does not break the statement prepared on a live connection.
    const result = await preparedQuery('agents.find', findAgentSql(), [id.toLowerCase()])
    agent = result.rows[0] ? Agent.$createFromAdapterResult(result.rows[0]) : null
  }
  if (!agent) throw new NotFoundException('Agent not found')
  return agent
}

/**
 * The agent, when `user` owns it (spec, Authentication rule 6): 404 when it
 * does not exist, 403 FORBIDDEN when it belongs to someone else. The one
 * ownership check of every agent route (the chat area uses it too).
 */
export async function ownedAgent(
  user: { id: string },
  id: unknown,
  options: { trx?: TransactionClientContract; forUpdate?: boolean } = {}
): Promise<Agent> {
  const agent = await findAgent(id, options)
  if (agent.userId !== user.id) {
    throw new ForbiddenException('This agent belongs to another account')
  }
  return agent
}
