import { DateTime } from 'luxon'
import db from '@adonisjs/lucid/services/db'
import { type TierKey, tierPlan } from '#config/plans'
import { NotFoundException, ValidationException } from '#core/exceptions/api_exceptions'
import User from '#identity/models/user'
import { notify } from '#identity/services/notification_service'
import { enforceAgentLimitQuietly } from '#billing/services/agent_limit_enforcer'

/**
 * An account's plan set by staff, without a payment: the usual way to give a
 * plan where on-chain payments are not configured (a trial, a partner, a
 * refund). `until` ends a periodic tier (null: no end); free and lifetime
 * tiers have no expiry. The agent limit is applied at once, as after a
 * purchase. Monthly AI Credits follow the tier from the next monthly grant.
 */
export async function setPlanByStaff(userId: string, tier: TierKey, until: DateTime | null) {
  const plan = tierPlan(tier)
  if (until && until <= DateTime.utc()) {
    throw new ValidationException('until: the plan must end in the future')
  }
  const expiresAt = tier === 'free' || plan.lifetime ? null : until
  const changed = await db.transaction(async (trx) => {
    const account = await User.query({ client: trx }).where('id', userId).forUpdate().first()
    if (!account) throw new NotFoundException('User not found')
    const before = {
      tier: account.tier,
      subscriptionExpiresAt: account.subscriptionExpiresAt?.toUTC().toISO() ?? null,
    }
    account.tier = tier
    account.subscriptionExpiresAt = expiresAt
    await account.useTransaction(trx).save()
    await notify(
      account.id,
      {
        type: 'subscription_activated',
        title: `${plan.name} set by the service`,
        body: expiresAt
          ? `Your plan is now ${plan.name} until ${expiresAt.toUTC().toISODate()}.`
          : `Your plan is now ${plan.name}.`,
      },
      { trx }
    )
    return {
      before,
      after: { tier, subscriptionExpiresAt: expiresAt?.toUTC().toISO() ?? null },
    }
  })
  await enforceAgentLimitQuietly(userId, { limitChanged: true })
  return changed
}
