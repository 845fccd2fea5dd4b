import { isUuid } from '#core/http/ids'
import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import { NotFoundException } from '#core/exceptions/api_exceptions'
import Agent from '#agents/models/agent'
import { preparedQuery } from '#core/database/prepared_query'

/** The plain read's prepared statements (name and text), by extra select expressions. */
const selectById = new Map<string, { name: string; text: string }>()

function findAgentStatement(extra = '') {
  let statement = selectById.get(extra)
  if (!statement) {
    Agent.boot()
    const columns = [...Agent.$columnsDefinitions.values()].map(
      (column) => `"${column.columnName}"`
    )
    if (extra) columns.push(extra)
    statement = {
      name: `agents.find.${selectById.size}`,
      text: `select ${columns.join(', ')} from agents where id = $1`,
    }
    selectById.set(extra, statement)
  }
  return statement
}

export interface FindAgentOptions {
  trx?: TransactionClientContract
  forUpdate?: boolean
  /**
   * Extra select expressions (`<expression> as <name>`) read with the row in
   * the same round trip, found in `agent.$extras`. Plain reads only (ignored
   * with `trx` or `forUpdate`).
   */
  extra?: string
}

/**
 * The agent with this id; 404 for unknown and malformed ids alike. The one
 * agent lookup of every agent route: whether the caller may act on it is
 * AgentPolicy's answer (`bouncer.with(AgentPolicy).authorize(...)`).
 */
export async function findAgent(id: unknown, options: FindAgentOptions = {}): Promise<Agent> {
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
    const statement = findAgentStatement(options.extra)
    const result = await preparedQuery(statement.name, statement.text, [id.toLowerCase()])
    agent = result.rows[0] ? Agent.$createFromAdapterResult(result.rows[0]) : null
  }
  if (!agent) throw new NotFoundException('Agent not found')
  return agent
}
