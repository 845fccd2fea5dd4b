import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import { ForbiddenException, NotFoundException } from '#core/exceptions/api_exceptions'
import Agent from '#agents/models/agent'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value)
}

/** The agent with this id; 404 for unknown and malformed ids alike. */
export async function findAgent(
  id: unknown,
  options: { trx?: TransactionClientContract; forUpdate?: boolean } = {}
): Promise<Agent> {
  if (!isUuid(id)) throw new NotFoundException('Agent not found')
  const query = Agent.query({ client: options.trx }).where('id', id.toLowerCase())
  if (options.forUpdate) query.forUpdate()
  const agent = await query.first()
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
