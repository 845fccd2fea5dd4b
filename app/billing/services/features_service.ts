import {
  addons,
  tierOrder,
  tierPlan,
  tiers,
  type AddonPlan,
  type TierKey,
  type TierPlan,
} from '#config/plans'
import type User from '#identity/models/user'
import creditLedger from '#credits/services/credit_ledger'
import { activeAddonsOf, agentLimitOf, presentAddon } from '#billing/services/agent_limits'
import { countAgents } from '#billing/services/agent_usage'
import { foundingStatus } from '#billing/services/founding_slots'

/** A tier in GET /features (spec "Tier", plus its daily request limit, maxSkills and daily tool uses). */
function presentTier(plan: TierPlan) {
  return {
    key: plan.key,
    name: plan.name,
    usdPrice: plan.usdPrice,
    includedAgents: plan.includedAgents,
    aiCreditsMonthly: plan.aiCreditsMonthly,
    dailyRequestLimit: plan.dailyRequestLimit,
    maxSkills: plan.maxSkills,
    maxSchedules: plan.maxSchedules,
    minScheduleIntervalMinutes: plan.minScheduleIntervalMinutes,
    dailyTokenScanLimit: plan.dailyTokenScanLimit,
    dailyResearchLimit: plan.dailyResearchLimit,
  }
}

function presentAddonPlan(plan: AddonPlan) {
  return { key: plan.key, name: plan.name, usdPrice: plan.usdPrice, type: plan.type }
}

/** GET /features: the catalogue of config/plans.ts and the Founding Member slots left. */
export async function catalogue() {
  return {
    tiers: Object.fromEntries(tierOrder.map((key) => [key, presentTier(tiers[key])])) as Record<
      TierKey,
      ReturnType<typeof presentTier>
    >,
    tierOrder: [...tierOrder],
    addons: Object.values(addons).map(presentAddonPlan),
    founding: await foundingStatus(),
  }
}

/**
 * GET /features/account. `tier` is the tier in effect (a paid tier past its
 * expiry counts as free even before the lapse job ran); `agentLimit` adds
 * the agents of every active add-on pack.
 */
export async function accountFeatures(user: User) {
  const tier = user.effectiveTier
  const plan = tierPlan(tier)
  const [packs, agentCount, balance] = await Promise.all([
    activeAddonsOf(user.id),
    countAgents(user.id),
    creditLedger.balanceOf(user.id),
  ])
  return {
    tier,
    tierConfig: { key: plan.key, name: plan.name, includedAgents: plan.includedAgents },
    activeAddons: packs.map(presentAddon),
    agentLimit: agentLimitOf(tier, packs),
    agentCount,
    platformCredits: 0,
    aiCredits: { balance, monthlyGrant: plan.aiCreditsMonthly, tier },
    subscriptionExpiresAt:
      tier !== 'free' && !plan.lifetime && user.subscriptionExpiresAt
        ? user.subscriptionExpiresAt.toUTC().toISO()
        : null,
    chatLimit: plan.dailyRequestLimit,
    searchLimit: plan.dailyResearchLimit,
  }
}
