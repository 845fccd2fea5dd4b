import { test } from '@japa/runner'
import { DateTime } from 'luxon'
import db from '@adonisjs/lucid/services/db'
import emitter from '@adonisjs/core/services/emitter'
import { registeredJobs, runJobExclusively } from '#core/jobs/periodic_jobs'
import AddonSubscription from '#billing/models/addon_subscription'
import { agentLimitFor } from '#billing/services/agent_limits'
import type { AgentLimitChanged } from '#billing/services/agent_limit_enforcer'
import { billingLapseJob, runBillingLapse } from '#billing/services/lapse_job'
import { monthlyGrantKey } from '#credits/services/monthly_grant'
import { createUser, creditsOf, reloadUser } from '#tests/helpers/identity'

async function notificationsOf(userId: string, type: string) {
  return db.from('notifications').where('user_id', userId).where('type', type)
}

async function tierOf(user: { id: string }) {
  const fresh = await reloadUser(user)
  return fresh.tier
}

/** Collects agents:limit_changed events while the test runs. */
function listen() {
  const events: AgentLimitChanged[] = []
  const handler = (event: AgentLimitChanged) => {
    events.push(event)
  }
  emitter.on('agents:limit_changed', handler)
  return { events, stop: () => emitter.off('agents:limit_changed', handler) }
}

test.group('Billing lapse job', () => {
  test('is registered as a periodic job', async ({ assert }) => {
    const job = registeredJobs().find((candidate) => candidate.name === 'billing:lapse')
    assert.exists(job)
    assert.equal(job!.everyMs, 60_000)
  })

  test('a lapsed paid tier goes back to free once; current and lifetime tiers stay', async ({
    assert,
    cleanup,
  }) => {
    const listener = listen()
    cleanup(listener.stop)
    const lapsed = await createUser({ tier: 'pro' })
    lapsed.subscriptionExpiresAt = DateTime.utc().minus({ minutes: 2 })
    await lapsed.save()
    const current = await createUser({ tier: 'business' })
    current.subscriptionExpiresAt = DateTime.utc().plus({ days: 3 })
    await current.save()
    const founder = await createUser({ tier: 'founding_member' })
    // Even a stray expiry never ends a lifetime tier.
    founder.subscriptionExpiresAt = DateTime.utc().minus({ days: 1 })
    await founder.save()

    const report = await runBillingLapse()
    assert.include(report.tiersLapsed, lapsed.id)
    assert.notInclude(report.tiersLapsed, current.id)
    assert.notInclude(report.tiersLapsed, founder.id)

    const after = await reloadUser(lapsed)
    assert.equal(after.tier, 'free')
    assert.isNull(after.subscriptionExpiresAt)
    assert.lengthOf(await notificationsOf(lapsed.id, 'subscription_lapsed'), 1)
    assert.equal(await tierOf(current), 'business')
    assert.equal(await tierOf(founder), 'founding_member')
    assert.equal(await agentLimitFor(lapsed.id), 1)

    // The agents area hears the new limit.
    const event = listener.events.find((candidate) => candidate.userId === lapsed.id)
    assert.deepInclude(event!, { userId: lapsed.id, agentLimit: 1 })

    const again = await runBillingLapse()
    assert.notInclude(again.tiersLapsed, lapsed.id)
    assert.lengthOf(await notificationsOf(lapsed.id, 'subscription_lapsed'), 1)
  })

  test('a lapsed agent pack ends once; the limit drops to what remains', async ({
    assert,
    cleanup,
  }) => {
    const listener = listen()
    cleanup(listener.stop)
    const user = await createUser({ tier: 'pro' })
    user.subscriptionExpiresAt = DateTime.utc().plus({ days: 10 })
    await user.save()
    const now = DateTime.utc()
    const ended = await AddonSubscription.create({
      userId: user.id,
      addonKey: 'addon.agents.3',
      extraAgents: 3,
      paymentId: null,
      startsAt: now.minus({ months: 1, minutes: 1 }),
      expiresAt: now.minus({ minutes: 1 }),
    })
    const running = await AddonSubscription.create({
      userId: user.id,
      addonKey: 'addon.agents.3',
      extraAgents: 3,
      paymentId: null,
      startsAt: now.minus({ days: 2 }),
      expiresAt: now.plus({ days: 28 }),
    })
    assert.equal(await agentLimitFor(user.id), 6)

    const report = await runBillingLapse()
    assert.include(report.addonsLapsed, ended.id)
    assert.notInclude(report.addonsLapsed, running.id)
    await ended.refresh()
    await running.refresh()
    assert.isNotNull(ended.lapsedAt)
    assert.isNull(running.lapsedAt)
    assert.lengthOf(await notificationsOf(user.id, 'addon_lapsed'), 1)
    const event = listener.events.find((candidate) => candidate.userId === user.id)
    assert.equal(event?.agentLimit, 6)

    await runBillingLapse()
    assert.lengthOf(await notificationsOf(user.id, 'addon_lapsed'), 1)
  })

  test('grants each verified account its monthly AI Credits once per month', async ({ assert }) => {
    const user = await createUser({ tier: 'starter' })
    user.subscriptionExpiresAt = DateTime.utc().plus({ days: 10 })
    await user.save()
    const unverified = await createUser({ verified: false })

    // Two instances ticking at once: one runs, the other skips or finds nothing to do.
    const runs = await Promise.all([
      runJobExclusively(billingLapseJob),
      runJobExclusively(billingLapseJob),
    ])
    assert.include(runs, true)
    await runBillingLapse()

    const entries = await db
      .from('credit_ledger')
      .where('user_id', user.id)
      .where('kind', 'monthly')
    assert.lengthOf(entries, 1)
    assert.equal(entries[0].credits, 3000)
    assert.equal(entries[0].idempotency_key, monthlyGrantKey(user.id))
    assert.equal(await creditsOf(user), 3000)
    assert.lengthOf(await db.from('credit_ledger').where('user_id', unverified.id), 0)
  })
})
