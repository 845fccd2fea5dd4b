/**
 * Agent rows for tests of other areas (billing, referrals, chat): inserted
 * directly, no container is started. Config secrets and tokens are stored
 * the way the agents area stores them.
 *
 *   const agent = await createAgentFor(user, { status: 'paused' })
 */
import { randomBytes } from 'node:crypto'
import { type DateTime } from 'luxon'
import Agent, { type AgentStatus } from '#agents/models/agent'
import { issueAgentTokens } from '#agents/services/agent_tokens'
import { encryptSecrets } from '#agents/services/config_secrets'

export interface CreateAgentOptions {
  name?: string
  framework?: string
  status?: AgentStatus
  config?: Record<string, unknown>
  createdAt?: DateTime
}

export async function createAgentFor(
  user: { id: string } | string,
  options: CreateAgentOptions = {}
): Promise<Agent> {
  const name = options.name ?? 'Fixture agent'
  const agent = new Agent()
  agent.merge({
    userId: typeof user === 'string' ? user : user.id,
    name,
    slug: `${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(4).toString('hex')}`,
    framework: options.framework ?? 'openclaw',
    status: options.status ?? 'active',
    config: encryptSecrets(options.config ?? { personality: 'A fixture agent' }),
    ...issueAgentTokens(),
  })
  if (options.createdAt) agent.createdAt = options.createdAt
  await agent.save()
  return agent
}
