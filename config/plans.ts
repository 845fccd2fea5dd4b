/**
 * The tier and add-on catalogue: the one source of truth (spec "Tier
 * catalogue", CONTRACT.md "Plans") that limits, grants, agent limits,
 * GET /features and payments all read.
 */

export type TierKey = 'free' | 'starter' | 'pro' | 'business' | 'founding_member'
export type AddonKey = 'addon.agents.3' | 'addon.ai_credits.25000'
export type BillingPeriod = 'monthly' | 'annual'

export interface TierPlan {
  key: TierKey
  name: string
  /** Monthly price in USD (founding_member: one-time, lifetime). */
  usdPrice: number
  includedAgents: number
  aiCreditsMonthly: number
  /** Daily /api/v1 request limit (CONTRACT.md). */
  dailyRequestLimit: number
  /** Catalogue skills installed per agent (spec "Skills state"; free 2). */
  maxSkills: number
  /** Scheduled tasks per agent (docs/schedules.md). */
  maxSchedules: number
  /** Shortest time between two runs of one scheduled task, in minutes. */
  minScheduleIntervalMinutes: number
  /** Knowledge files of one agent together, in bytes (UTF-8). */
  maxKnowledgeBytes: number
  /** Daily research allowance per account (CONTRACT.md `searchLimit`; spec: 20). */
  dailyResearchLimit: number
  /** Daily token scans per account (spec "Other limits": 10). */
  dailyTokenScanLimit: number
  /** Lifetime purchase with no expiry. */
  lifetime: boolean
}

export interface AddonPlan {
  key: AddonKey
  name: string
  usdPrice: number
  type: 'subscription' | 'one_time'
  extraAgents: number
  aiCredits: number
  /** Months a subscription add-on lasts per purchase. */
  durationMonths: number
}

export const tierOrder: TierKey[] = ['free', 'starter', 'pro', 'business', 'founding_member']

export const tiers: Record<TierKey, TierPlan> = {
  free: {
    key: 'free',
    name: 'Free',
    usdPrice: 0,
    includedAgents: 1,
    aiCreditsMonthly: 500,
    dailyRequestLimit: 100,
    maxSkills: 2,
    maxSchedules: 2,
    minScheduleIntervalMinutes: 5,
    maxKnowledgeBytes: 1 * 1024 * 1024,
    dailyResearchLimit: 20,
    dailyTokenScanLimit: 10,
    lifetime: false,
  },
  starter: {
    key: 'starter',
    name: 'Starter',
    usdPrice: 6.99,
    includedAgents: 1,
    aiCreditsMonthly: 3000,
    dailyRequestLimit: 10_000,
    maxSkills: 5,
    maxSchedules: 5,
    minScheduleIntervalMinutes: 5,
    maxKnowledgeBytes: 5 * 1024 * 1024,
    dailyResearchLimit: 20,
    dailyTokenScanLimit: 10,
    lifetime: false,
  },
  pro: {
    key: 'pro',
    name: 'Pro',
    usdPrice: 19.99,
    includedAgents: 3,
    aiCreditsMonthly: 15_000,
    dailyRequestLimit: 100_000,
    maxSkills: 10,
    maxSchedules: 20,
    minScheduleIntervalMinutes: 1,
    maxKnowledgeBytes: 20 * 1024 * 1024,
    dailyResearchLimit: 20,
    dailyTokenScanLimit: 10,
    lifetime: false,
  },
  business: {
    key: 'business',
    name: 'Business',
    usdPrice: 49.99,
    includedAgents: 5,
    aiCreditsMonthly: 40_000,
    dailyRequestLimit: 500_000,
    maxSkills: 25,
    maxSchedules: 50,
    minScheduleIntervalMinutes: 1,
    maxKnowledgeBytes: 50 * 1024 * 1024,
    dailyResearchLimit: 20,
    dailyTokenScanLimit: 10,
    lifetime: false,
  },
  founding_member: {
    key: 'founding_member',
    name: 'Founding Member',
    usdPrice: 99,
    includedAgents: 10,
    aiCreditsMonthly: 25_000,
    dailyRequestLimit: 500_000,
    maxSkills: 25,
    maxSchedules: 50,
    minScheduleIntervalMinutes: 1,
    maxKnowledgeBytes: 50 * 1024 * 1024,
    dailyResearchLimit: 20,
    dailyTokenScanLimit: 10,
    lifetime: true,
  },
}

export const addons: Record<AddonKey, AddonPlan> = {
  'addon.agents.3': {
    key: 'addon.agents.3',
    name: '3 extra agents',
    usdPrice: 6.99,
    type: 'subscription',
    extraAgents: 3,
    aiCredits: 0,
    durationMonths: 1,
  },
  'addon.ai_credits.25000': {
    key: 'addon.ai_credits.25000',
    name: '25,000 AI Credits',
    usdPrice: 30,
    type: 'one_time',
    extraAgents: 0,
    aiCredits: 25_000,
    durationMonths: 0,
  },
}

export const foundingMemberSlots = 20

/** Annual billing costs 10 monthly prices and lasts 12 months (CONTRACT.md). */
export const annualPriceMultiplier = 10

export const referralRewardCredits = 500

export function isTierKey(value: unknown): value is TierKey {
  return typeof value === 'string' && value in tiers
}

/** The plan for a stored tier value; unknown values fall back to free. */
export function tierPlan(key: string | null | undefined): TierPlan {
  return isTierKey(key) ? tiers[key] : tiers.free
}
