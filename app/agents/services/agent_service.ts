import { randomInt } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import type { TransactionClientContract } from '@adonisjs/lucid/types/database'
import { NotFoundException } from '#core/exceptions/api_exceptions'
import { assertAgentSlotAvailable } from '#billing/services/agent_limits'
import Agent from '#agents/models/agent'
import type AgentConfigVersion from '#agents/models/agent_config_version'
import { findAgent } from '#agents/services/agent_access'
import {
  assertConfigDepth,
  changedKeys,
  frameworkPlugin,
  sameConfig,
  validateConfig,
} from '#agents/services/agent_config'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import {
  presentDetail,
  presentListItem,
  type AgentDetail,
  type AgentListItem,
} from '#agents/services/agent_presenter'
import { issueAgentTokens } from '#agents/services/agent_tokens'
import {
  decryptSecrets,
  encryptSecrets,
  mergeConfig,
  stripMasks,
  type Config,
} from '#agents/services/config_secrets'
import { recordVersion } from '#agents/services/config_versions'
import { syncAgentChannels } from '#channels/services/channel_sync'

export interface CreateAgentInput {
  name: string
  framework: string
  description?: string | null
  avatarUrl?: string | null
  config?: Config
}

export interface UpdateAgentInput {
  name?: string
  description?: string | null
  avatarUrl?: string | null
  config?: Config
  commitMessage?: string
}

export interface AgentPage {
  agents: AgentListItem[]
  total: number
  page: number
  limit: number
}

const SLUG_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789'
const SLUG_SUFFIX_LENGTH = 6

/** Lower-case name (ASCII letters and digits, dashes between words) plus a random suffix. */
export function slugFor(name: string): string {
  const base =
    name
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '')
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 40)
      .replace(/-+$/, '') || 'agent'
  let suffix = ''
  for (let i = 0; i < SLUG_SUFFIX_LENGTH; i++) suffix += SLUG_ALPHABET[randomInt(36)]
  return `${base}-${suffix}`
}

async function uniqueSlug(name: string, trx: TransactionClientContract): Promise<string> {
  for (;;) {
    const slug = slugFor(name)
    const taken = await trx.from('agents').where('slug', slug).select('id').first()
    if (!taken) return slug
  }
}

/**
 * POST /agents: checks the framework and its config, takes an agent slot
 * (400 beyond the plan's limit), stores the agent and its version 1, then
 * starts its container in the background (the request does not wait).
 */
export async function createAgent(
  user: { id: string },
  input: CreateAgentInput,
  options: {
    /** Fills the new agent in (an import, a clone) in its transaction, before its first start. */
    populate?: (agent: Agent, trx: TransactionClientContract) => Promise<void>
  } = {}
) {
  assertConfigDepth(input.config)
  const plugin = await frameworkPlugin(input.framework)
  const config = validateConfig(plugin, stripMasks(input.config ?? {}))
  const agent = await db.transaction(async (trx) => {
    await assertAgentSlotAvailable(trx, user.id)
    const created = await Agent.create(
      {
        userId: user.id,
        name: input.name,
        slug: await uniqueSlug(input.name, trx),
        description: input.description ?? null,
        avatarUrl: input.avatarUrl ?? null,
        framework: plugin.name,
        status: 'active',
        config: encryptSecrets(config),
        ...issueAgentTokens(),
      },
      { client: trx }
    )
    await recordVersion(trx, created.id, created.config, 'Initial configuration')
    await options.populate?.(created, trx)
    return created
  })
  agentLifecycle.startInBackground(agent)
  await syncAgentChannels(agent)
  return presentDetail(agent)
}

/**
 * Config keys only the service reads (the monthly budget: the credit holds
 * read it from the row): changing them alone does not restart a running
 * container, which would interrupt the agent for nothing.
 */
const SERVICE_ONLY_CONFIG_KEYS = new Set(['budget'])

/**
 * PATCH /agents/:id: name, description, avatar; `config` is deep-merged
 * into the stored one (`***` keeps a secret, `null` removes a key),
 * validated by the framework plugin and, when it changed, stored as a new
 * version; a running container is then reconfigured.
 */
export async function updateAgent(
  authorized: Agent,
  input: UpdateAgentInput
): Promise<AgentDetail> {
  const { agent, configChanged, containerConfigChanged } = await db.transaction(async (trx) => {
    const locked = await findAgent(authorized.id, { trx, forUpdate: true })
    if (input.name !== undefined) locked.name = input.name
    if (input.description !== undefined) locked.description = input.description
    if (input.avatarUrl !== undefined) locked.avatarUrl = input.avatarUrl

    let changed = false
    let forContainer = false
    if (input.config !== undefined) {
      const before = decryptSecrets(locked.config)
      const plugin = await frameworkPlugin(locked.framework)
      const after = validateConfig(plugin, mergeConfig(before, input.config))
      if (!sameConfig(before, after)) {
        changed = true
        locked.config = encryptSecrets(after)
        const keys = changedKeys(before, after)
        forContainer = keys.some((key) => !SERVICE_ONLY_CONFIG_KEYS.has(key))
        await recordVersion(
          trx,
          locked.id,
          locked.config,
          input.commitMessage?.trim() || `Changed ${keys.join(', ')}`
        )
      }
    }
    locked.useTransaction(trx)
    await locked.save()
    return { agent: locked, configChanged: changed, containerConfigChanged: forContainer }
  })
  if (configChanged) {
    if (containerConfigChanged) agentLifecycle.reconfigureInBackground(agent)
    await syncAgentChannels(agent)
    await agent.refresh()
  }
  return presentDetail(agent)
}

/**
 * Restores a stored version (by number) or snapshot (by id): the config
 * becomes that version's, stored as a new version; a running container is
 * reconfigured.
 */
export async function restoreConfig(
  authorized: Agent,
  find: (agent: Agent, trx: TransactionClientContract) => Promise<AgentConfigVersion>
): Promise<AgentDetail & { version: number; restoredFrom: number }> {
  const { agent, version, restoredFrom } = await db.transaction(async (trx) => {
    const locked = await findAgent(authorized.id, { trx, forUpdate: true })
    const source = await find(locked, trx)
    const plugin = await frameworkPlugin(locked.framework)
    const config = validateConfig(plugin, decryptSecrets(source.config))
    locked.config = encryptSecrets(config)
    const row = await recordVersion(
      trx,
      locked.id,
      locked.config,
      `Restored version ${source.version}`
    )
    locked.useTransaction(trx)
    await locked.save()
    return { agent: locked, version: row.version, restoredFrom: source.version }
  })
  agentLifecycle.reconfigureInBackground(agent)
  await syncAgentChannels(agent)
  await agent.refresh()
  return { ...presentDetail(agent), version, restoredFrom }
}

/**
 * DELETE /agents/:id: the agent is gone at once; its container and data
 * are removed in the background (a service that dies meanwhile finishes
 * the job at its next boot, whose sweep removes containers of deleted
 * agents).
 */
export async function deleteAgent(agent: Agent) {
  await Agent.query().where('id', agent.id).delete()
  agentLifecycle.removeInBackground(agent.id)
  return { deleted: true as const }
}

/** The account's agents, newest first, one page. */
export async function listAgents(
  userId: string,
  page: { page: number; limit: number }
): Promise<AgentPage> {
  const [rows, count] = await Promise.all([
    Agent.query()
      .where('user_id', userId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(page.limit)
      .offset((page.page - 1) * page.limit),
    db.from('agents').where('user_id', userId).count('* as total').first(),
  ])
  return {
    agents: rows.map(presentListItem),
    total: Number(count?.total ?? 0),
    page: page.page,
    limit: page.limit,
  }
}

/** The agent of GET /agents/by-slug/:slug (its owner gets the detail, anyone else the public fields). */
export async function agentBySlug(slug: string): Promise<Agent> {
  const agent = /^[a-z0-9-]{1,80}$/.test(slug) ? await Agent.findBy('slug', slug) : null
  if (!agent) throw new NotFoundException('Agent not found')
  return agent
}

/** Rows for the personal data export: every agent with its config masked. */
export async function agentsForExport(userId: string) {
  const agents = await Agent.query().where('user_id', userId).orderBy('created_at', 'asc')
  return agents.map(presentDetail)
}
