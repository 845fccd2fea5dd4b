import { DateTime } from 'luxon'
import db from '@adonisjs/lucid/services/db'
import logger from '@adonisjs/core/services/logger'
import { addons, tierOrder, tierPlan } from '#config/plans'
import type { PeriodicJob } from '#core/jobs/periodic_jobs'
import User from '#identity/models/user'
import { notify } from '#identity/services/notification_service'
import { grantMonthlyCredits } from '#credits/services/monthly_grant'
import AddonSubscription from '#billing/models/addon_subscription'
import { enforceAgentLimit } from '#billing/services/agent_limit_enforcer'
import { accountsWithPausedAgents } from '#billing/services/agent_usage'

/** Rows handled per query, so one tick never loads every account at once. */
const BATCH = 200

export interface LapseReport {
  /** Accounts whose paid tier ended (now free). */
  tiersLapsed: string[]
  /** Add-on packs that ended. */
  addonsLapsed: string[]
  /** Agents paused and resumed, by account. */
  paused: Record<string, string[]>
  resumed: Record<string, string[]>
  /** Accounts that received this month's AI Credits. */
  monthlyGrants: string[]
}

/** Tiers with an expiry (every tier but free and the lifetime ones). */
function expiringTiers(): string[] {
  return tierOrder.filter((key) => key !== 'free' && !tierPlan(key).lifetime)
}

/** Paid tiers past `subscriptionExpiresAt` go back to free, each once, with a notification. */
async function lapseTiers(now: DateTime): Promise<string[]> {
  const lapsed: string[] = []
  for (;;) {
    const due: { id: string }[] = await db
      .from('users')
      .whereIn('tier', expiringTiers())
      .whereNotNull('subscription_expires_at')
      .where('subscription_expires_at', '<=', now.toJSDate())
      .orderBy('subscription_expires_at', 'asc')
      .limit(BATCH)
      .select('id')
    if (due.length === 0) return lapsed
    for (const { id } of due) {
      const done = await db.transaction(async (trx) => {
        const user = await User.query({ client: trx }).where('id', id).forUpdate().first()
        // Renewed or lapsed by another run meanwhile.
        if (
          !user ||
          !expiringTiers().includes(user.tier) ||
          !user.subscriptionExpiresAt ||
          user.subscriptionExpiresAt > now
        ) {
          return false
        }
        const ended = tierPlan(user.tier)
        user.tier = 'free'
        user.subscriptionExpiresAt = null
        await user.useTransaction(trx).save()
        await notify(
          user.id,
          {
            type: 'subscription_lapsed',
            title: `Your ${ended.name} plan ended`,
            body: `Your ${ended.name} plan expired and your account is on the Free plan now. Subscribe again at any time to get its limits back.`,
          },
          { trx }
        )
        return true
      })
      if (done) lapsed.push(id)
    }
    if (due.length < BATCH) return lapsed
  }
}

/** Add-on packs past their expiry are marked lapsed once, with a notification per account. */
async function lapseAddons(now: DateTime): Promise<{ ids: string[]; users: Set<string> }> {
  const ids: string[] = []
  const users = new Set<string>()
  for (;;) {
    const due = await AddonSubscription.query()
      .whereNull('lapsed_at')
      .where('expires_at', '<=', now.toJSDate())
      .orderBy('expires_at', 'asc')
      .limit(BATCH)
    if (due.length === 0) break
    const byUser = new Map<string, AddonSubscription[]>()
    for (const row of due) byUser.set(row.userId, [...(byUser.get(row.userId) ?? []), row])
    for (const [userId, rows] of byUser) {
      const marked = await db.transaction(async (trx) => {
        const updated: { id: string; addon_key: string; extra_agents: number }[] =
          await AddonSubscription.query({ client: trx })
            .whereIn(
              'id',
              rows.map((row) => row.id)
            )
            .whereNull('lapsed_at')
            .update({ lapsed_at: now.toJSDate(), updated_at: new Date() }, [
              'id',
              'addon_key',
              'extra_agents',
            ])
        if (updated.length > 0) {
          const agents = updated.reduce((sum, row) => sum + row.extra_agents, 0)
          const names = [
            ...new Set(
              updated.map(
                (row) => addons[row.addon_key as keyof typeof addons]?.name ?? row.addon_key
              )
            ),
          ]
          await notify(
            userId,
            {
              type: 'addon_lapsed',
              title: `${names.join(', ')} ended`,
              body: `Your add-on ended${agents > 0 ? `, so your agent limit is ${agents} lower` : ''}. Buy it again at any time.`,
            },
            { trx }
          )
        }
        return updated.map((row) => row.id)
      })
      ids.push(...marked)
      if (marked.length > 0) users.add(userId)
    }
    if (due.length < BATCH) break
  }
  return { ids, users }
}

/** Verified accounts without this month's grant receive it (idempotent per month). */
async function grantMonthly(now: DateTime): Promise<string[]> {
  const granted: string[] = []
  const month = now.toUTC().toISO()!.slice(0, 7)
  let after = ''
  for (;;) {
    const due = await User.query()
      .whereNotNull('email_verified_at')
      .whereNull('disabled_at')
      .if(after, (query) => query.where('id', '>', after))
      .whereNotExists((sub) =>
        sub
          .from('credit_ledger')
          .whereRaw(`credit_ledger.idempotency_key = 'monthly:' || users.id::text || ':' || ?`, [
            month,
          ])
      )
      .orderBy('id', 'asc')
      .limit(BATCH)
    for (const user of due) {
      const result = await grantMonthlyCredits(user, { now: now.toJSDate() })
      if (result?.applied) granted.push(user.id)
    }
    if (due.length < BATCH) return granted
    after = due[due.length - 1].id
  }
}

/**
 * One run of the billing lapse job: lapses tiers and add-on packs, applies
 * the (new) agent limit of every account concerned, resumes paused agents
 * wherever the limit allows again, and grants this month's AI Credits.
 * Every step is conditional on the stored state, so overlapping or repeated
 * runs change nothing twice.
 */
export async function runBillingLapse(now: DateTime = DateTime.utc()): Promise<LapseReport> {
  const tiersLapsed = await lapseTiers(now)
  const addonLapse = await lapseAddons(now)

  const changed = new Set<string>([...tiersLapsed, ...addonLapse.users])
  const accounts = new Set<string>([...changed, ...(await accountsWithPausedAgents())])
  const paused: Record<string, string[]> = {}
  const resumed: Record<string, string[]> = {}
  for (const userId of accounts) {
    try {
      const change = await enforceAgentLimit(userId, { limitChanged: changed.has(userId) })
      if (change.paused.length > 0) paused[userId] = change.paused
      if (change.resumed.length > 0) resumed[userId] = change.resumed
    } catch (error) {
      logger.error({ err: error, userId }, 'applying the agent limit failed')
    }
  }

  const monthlyGrants = await grantMonthly(now)
  return { tiersLapsed, addonsLapsed: addonLapse.ids, paused, resumed, monthlyGrants }
}

/** Registered by start/jobs.ts; runs every minute on one instance at a time. */
export const billingLapseJob: PeriodicJob = {
  name: 'billing:lapse',
  everyMs: 60_000,
  async run() {
    await runBillingLapse()
  },
}
