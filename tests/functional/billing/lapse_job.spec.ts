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
import { createAgentFor } from '#tests/helpers/agents_fixture'
import Agent from '#agents/models/agent'
import { ValidationException } from '#core/exceptions/api_exceptions'
import { assertAgentSlotAvailable } from '#billing/services/agent_limits'

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

  test('lapse pauses the newest agents beyond the new limit; a bigger limit resumes them', async ({
    assert,
    cleanup,
  }) => {
    const listener = listen()
    cleanup(listener.stop)
    const user = await createUser({ tier: 'business' })
    user.subscriptionExpiresAt = DateTime.utc().minus({ minutes: 1 })
    await user.save()
    const start = DateTime.utc().minus({ days: 10 })
    const statuses = ['active', 'stopped', 'active', 'active'] as const
    const agents: Agent[] = []
    for (const [index, status] of statuses.entries()) {
      agents.push(await createAgentFor(user, { status, createdAt: start.plus({ days: index }) }))
    }
    const bystander = await createUser({ tier: 'free' })
    const theirs = await createAgentFor(bystander)

    const report = await runBillingLapse()
    assert.include(report.tiersLapsed, user.id)
    // Free allows 1: the oldest stays as it was, the three newer are paused.
    assert.sameMembers(report.paused[user.id], [agents[1].id, agents[2].id, agents[3].id])
    const statusOf = async (agent: Agent) => {
      const fresh = await Agent.findOrFail(agent.id)
      return fresh.status
    }
    assert.equal(await statusOf(agents[0]), 'active')
    for (const agent of agents.slice(1)) assert.equal(await statusOf(agent), 'paused')
    assert.equal(await statusOf(theirs), 'active')
    assert.lengthOf(await notificationsOf(user.id, 'agents_paused'), 1)
    const event = listener.events.find((candidate) => candidate.userId === user.id)
    assert.deepEqual(event, {
      userId: user.id,
      agentLimit: 1,
      paused: report.paused[user.id],
      resumed: [],
    })

    // Creating one more is refused while at the limit.
    await assert.rejects(
      () => db.transaction((trx) => assertAgentSlotAvailable(trx, user.id)),
      ValidationException
    )

    // One more agent allowed (limit 2): the oldest paused agent resumes.
    const now = DateTime.utc()
    await AddonSubscription.create({
      userId: user.id,
      addonKey: 'addon.agents.3',
      extraAgents: 1,
      paymentId: null,
      startsAt: now.minus({ minutes: 1 }),
      expiresAt: now.plus({ days: 30 }),
    })
    const partial = await runBillingLapse()
    assert.deepEqual(partial.resumed[user.id], [agents[1].id])
    assert.equal(await statusOf(agents[1]), 'active')
    assert.equal(await statusOf(agents[2]), 'paused')

    await AddonSubscription.create({
      userId: user.id,
      addonKey: 'addon.agents.3',
      extraAgents: 3,
      paymentId: null,
      startsAt: now.minus({ minutes: 1 }),
      expiresAt: now.plus({ days: 30 }),
    })
    // Three more (limit 5): the rest resume, oldest first.
    const full = await runBillingLapse()
    assert.deepEqual(full.resumed[user.id], [agents[2].id, agents[3].id])
    for (const agent of agents) assert.notEqual(await statusOf(agent), 'paused')
    assert.lengthOf(await notificationsOf(user.id, 'agents_resumed'), 2)
    const resumedEvent = listener.events.findLast((candidate) => candidate.userId === user.id)
    assert.deepEqual(resumedEvent?.resumed, [agents[2].id, agents[3].id])

    // Nothing left to do: another run changes nothing.
    const idle = await runBillingLapse()
    assert.notProperty(idle.paused, user.id)
    assert.notProperty(idle.resumed, user.id)
  })
})
