import { DateTime } from 'luxon'
import type { QueryClientContract, TransactionClientContract } from '@adonisjs/lucid/types/database'
import { addons, tierPlan, type AddonKey, type TierKey } from '#config/plans'
import { NotFoundException, ValidationException } from '#core/exceptions/api_exceptions'
import User from '#identity/models/user'
import AddonSubscription from '#billing/models/addon_subscription'
import { planHintWithoutPayments } from '#billing/services/payment_config'
import { countAgents } from '#billing/services/agent_usage'

/**
 * Agent limits: `includedAgents` of the tier in effect plus the agents of
 * every add-on pack not yet expired (CONTRACT.md "Plans"). The agents area
 * calls `assertAgentSlotAvailable` when creating an agent; the lapse job and
 * purchases call `enforceAgentLimit` (agent_limit_enforcer.ts).
 */

export interface ActiveAddonView {
  key: AddonKey
  name: string
  extraAgents: number
  expiresAt: string
}

/** Add-on packs in force for the account at `now`, soonest expiry first. */
export async function activeAddonsOf(
  userId: string,
  options: { client?: QueryClientContract; now?: DateTime } = {}
): Promise<AddonSubscription[]> {
  const now = options.now ?? DateTime.utc()
  return AddonSubscription.query({ client: options.client })
    .where('user_id', userId)
    .where('starts_at', '<=', now.toJSDate())
    .where('expires_at', '>', now.toJSDate())
    .orderBy('expires_at', 'asc')
}

export function presentAddon(row: AddonSubscription): ActiveAddonView {
  return {
    key: row.addonKey,
    name: addons[row.addonKey]?.name ?? row.addonKey,
    extraAgents: row.extraAgents,
    expiresAt: row.expiresAt.toUTC().toISO()!,
  }
}

/** The limit for a tier and a set of active packs. */
export function agentLimitOf(tier: TierKey, packs: { extraAgents: number }[]): number {
  return tierPlan(tier).includedAgents + packs.reduce((sum, pack) => sum + pack.extraAgents, 0)
}

/**
 * How many agents the account may have now: the tier in effect (a lapsed
 * paid tier counts as free) plus active add-on agents.
 */
export async function agentLimitFor(
  user: string | User,
  options: { client?: QueryClientContract; now?: DateTime } = {}
): Promise<number> {
  const account =
    typeof user === 'string' ? await User.find(user, { client: options.client }) : user
  if (!account) throw new NotFoundException('User not found')
  const packs = await activeAddonsOf(account.id, options)
  return agentLimitOf(account.effectiveTier, packs)
}

/**
 * Serialises agent creation and limit enforcement for one account inside
 * the caller's transaction (released at commit or rollback).
 */
export async function lockAgentSlots(trx: TransactionClientContract, userId: string) {
  await trx.rawQuery('select pg_advisory_xact_lock(hashtext(?))', [`agents:limit:${userId}`])
}

/**
 * For agent creation, inside the transaction that inserts the agent: takes
 * the account's agent-slot lock, then throws 400 VALIDATION_ERROR when the
 * account already has `agentLimit` agents or more. Returns the limit and the
 * count before the new agent.
 */
export async function assertAgentSlotAvailable(
  trx: TransactionClientContract,
  userId: string
): Promise<{ agentLimit: number; agentCount: number }> {
  await lockAgentSlots(trx, userId)
  const agentLimit = await agentLimitFor(userId, { client: trx })
  const agentCount = await countAgents(userId, trx)
  if (agentCount >= agentLimit) {
    throw new ValidationException(
      `Agent limit reached: your plan allows ${agentLimit} agent${agentLimit === 1 ? '' : 's'} and you have ${agentCount}. Upgrade your plan or add an agent pack (addon.agents.3) to create more.${planHintWithoutPayments()}`
    )
  }
  return { agentLimit, agentCount }
}
