import db from '@adonisjs/lucid/services/db'
import { appUrl } from '#config/app'
import { referralRewardCredits } from '#config/plans'
import User from '#identity/models/user'
import { notify } from '#identity/services/notification_service'
import creditLedger from '#credits/services/credit_ledger'
import { accountsWithAgents } from '#billing/services/agent_usage'
import ReferralReward from '#referrals/models/referral_reward'

/**
 * Referrals: an account registered with another's `referralCode` has that
 * account as `referredById` (set by registration). Once the referred account
 * has verified its e-mail and created an agent, the referrer's claim pays
 * 500 AI Credits to each side, once per referred account.
 */

/** Referrals listed in the stats at most (newest first). */
const STATS_LIST_LIMIT = 500

export const REWARD_UNIT = 'ai_credits'

/** Where a referral code is shared: registration with the code filled in. */
export function shareLinkFor(code: string): string {
  return `${appUrl}/register?ref=${encodeURIComponent(code)}`
}

/** GET /referrals/my-code. */
export function myCode(user: User) {
  return {
    referralCode: user.referralCode,
    shareLink: shareLinkFor(user.referralCode),
    username: user.username,
  }
}

/** GET /referrals/stats. */
export async function stats(user: User) {
  const [referred, totals] = await Promise.all([
    User.query()
      .where('referred_by_id', user.id)
      .orderBy('created_at', 'desc')
      .limit(STATS_LIST_LIMIT)
      .select('id', 'username', 'created_at'),
    db.from('users').where('referred_by_id', user.id).count('* as total').first(),
  ])
  const rewards = await ReferralReward.query()
    .where('referrer_id', user.id)
    .select('referred_id', 'credits_each')
  const paid = new Map(rewards.map((reward) => [reward.referredId, reward.creditsEach]))
  return {
    totalReferred: Number(totals?.total ?? 0),
    totalEarned: rewards.reduce((sum, reward) => sum + reward.creditsEach, 0),
    rewardPerReferral: referralRewardCredits,
    rewardUnit: REWARD_UNIT,
    referrals: referred.map((account) => ({
      username: account.username,
      date: account.createdAt.toUTC().toISO()!,
      rewardClaimed: paid.has(account.id),
    })),
  }
}

/**
 * A referral pays only for a distinct person: not the referrer again (same
 * mailbox once aliases are folded, same sign-up network, same wallet), and
 * one reward per mailbox or sign-up network among the referrer's invitees.
 */
function samePerson(a: User, b: User): boolean {
  return (
    (a.emailCanonical !== null && a.emailCanonical === b.emailCanonical) ||
    (a.signupIpHash !== null && a.signupIpHash === b.signupIpHash) ||
    (a.walletAddress !== null && a.walletAddress === b.walletAddress)
  )
}

/** Referred accounts of `referrer` that are eligible and not paid yet. */
async function eligibleReferrals(referrer: User): Promise<User[]> {
  const referred = await User.query()
    .where('referred_by_id', referrer.id)
    .whereNot('id', referrer.id)
    .orderBy('created_at', 'asc')
  const rewarded = await db.from('referral_rewards').where('referrer_id', referrer.id)
  const paid = new Set(rewarded.map((row) => row.referred_id as string))
  const unpaid = referred.filter((account) => !paid.has(account.id) && account.emailVerifiedAt)
  const withAgents = await accountsWithAgents(unpaid.map((account) => account.id))
  const counted: User[] = [referrer, ...referred.filter((account) => paid.has(account.id))]
  const eligible: User[] = []
  for (const account of unpaid) {
    if (!withAgents.has(account.id)) continue
    if (counted.some((other) => samePerson(account, other))) continue
    counted.push(account)
    eligible.push(account)
  }
  return eligible
}

/**
 * POST /referrals/claim: pays every eligible referral of the caller once.
 * Each payment is one transaction that first inserts the referral's reward
 * row (unique per referred account; a concurrent claim waits on it and then
 * inserts nothing), then writes both ledger entries and notifications.
 */
export async function claim(user: User) {
  const eligible = await eligibleReferrals(user)
  let claimed = 0
  for (const referred of eligible) {
    const paid = await db.transaction(async (trx) => {
      const inserted = await trx.rawQuery(
        `insert into referral_rewards (id, referrer_id, referred_id, credits_each, created_at)
         values (gen_random_uuid(), ?, ?, ?, now())
         on conflict (referred_id) do nothing
         returning id`,
        [user.id, referred.id, referralRewardCredits]
      )
      if (inserted.rows.length === 0) return false
      const rewardId: string = inserted.rows[0].id
      await creditLedger.credit(user.id, referralRewardCredits, {
        kind: 'referral',
        reason: `Referral reward: ${referred.username} joined`,
        idempotencyKey: `referral:${referred.id}:referrer`,
        metadata: { rewardId, referredId: referred.id, side: 'referrer' },
        trx,
      })
      await creditLedger.credit(referred.id, referralRewardCredits, {
        kind: 'referral',
        reason: `Referral reward: invited by ${user.username}`,
        idempotencyKey: `referral:${referred.id}:referred`,
        metadata: { rewardId, referrerId: user.id, side: 'referred' },
        trx,
      })
      await notify(
        user.id,
        {
          type: 'referral_reward',
          title: `${referralRewardCredits} AI Credits for referring ${referred.username}`,
          body: `${referred.username} verified their e-mail and created an agent.`,
        },
        { trx }
      )
      await notify(
        referred.id,
        {
          type: 'referral_reward',
          title: `${referralRewardCredits} AI Credits referral bonus`,
          body: `You joined through ${user.username}'s invitation: ${referralRewardCredits} AI Credits were added to your balance.`,
        },
        { trx }
      )
      return true
    })
    if (paid) claimed++
  }

  const toCaller = claimed * referralRewardCredits
  return {
    claimed,
    totalCredited: toCaller,
    referredCredited: toCaller,
    totalAiCreditsGranted: toCaller * 2,
    unit: REWARD_UNIT,
    message:
      claimed === 0
        ? 'No referral rewards to claim: a referral pays once the invited account has verified its e-mail and created an agent'
        : `Claimed ${claimed} referral reward${claimed === 1 ? '' : 's'}: ${toCaller} AI Credits for you and ${referralRewardCredits} for each invited account`,
  }
}

/** GET /referrals/validate/:code (public). */
export async function validate(code: string) {
  const normalized = code.trim().toUpperCase()
  const referrer = /^[A-Z0-9]{4,16}$/.test(normalized)
    ? await User.query().where('referral_code', normalized).whereNull('disabled_at').first()
    : null
  return { valid: referrer !== null, referrerUsername: referrer?.username ?? null }
}

/** The `referral_rewards` section of the data export: rewards the account gave or received. */
export async function referralRewardsForExport(userId: string) {
  const rows = await ReferralReward.query()
    .where('referrer_id', userId)
    .orWhere('referred_id', userId)
    .orderBy('created_at', 'asc')
  return rows.map((row) => ({
    id: row.id,
    role: row.referrerId === userId ? 'referrer' : 'referred',
    referrerId: row.referrerId,
    referredId: row.referredId,
    credits: row.creditsEach,
    createdAt: row.createdAt.toUTC().toISO(),
  }))
}
