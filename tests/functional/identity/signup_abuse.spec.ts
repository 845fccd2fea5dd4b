import { randomBytes } from 'node:crypto'
import { test } from '@japa/runner'
import { DateTime } from 'luxon'
import db from '@adonisjs/lucid/services/db'
import type { ApiClient } from '@japa/api-client'
import { identityLimits } from '#config/identity'
import User from '#identity/models/user'
import { canonicalEmail } from '#identity/services/person_signals'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { linkIn, waitForMail } from '#tests/helpers/mail'
import { tierPlan } from '#config/plans'
import { grantMonthlyCredits } from '#credits/services/monthly_grant'
import { creditsOf, jwtFor, uniqueUsername } from '#tests/helpers/identity'

/**
 * Sock puppets: many accounts from one network, and referral rewards farmed
 * with aliases of one mailbox or from the referrer's own network. Clients
 * are told apart by X-Forwarded-For (tests run with TRUST_PROXY=loopback).
 */
function randomIp() {
  return `198.51.${randomBytes(1)[0]}.${1 + (randomBytes(1)[0] % 250)}`
}

function randomLocal() {
  return `p${randomBytes(5).toString('hex')}`
}

function register(client: ApiClient, email: string, ip: string, referralCode?: string) {
  return client
    .post('/auth/register')
    .header('x-forwarded-for', ip)
    .json({
      email,
      username: uniqueUsername('puppet'),
      password: 'correct-horse-battery-staple',
      ...(referralCode ? { referralCode } : {}),
    })
}

/** Registered through the route, then verified and given an agent: eligible but for the signals. */
async function invitee(client: ApiClient, email: string, ip: string, referralCode: string) {
  const answer = await register(client, email, ip, referralCode)
  answer.assertStatus(200)
  const user = await User.findByOrFail('email', email.toLowerCase())
  user.emailVerifiedAt = user.createdAt
  await user.save()
  await createAgentFor(user)
  return user
}

test.group('Sign-up abuse', () => {
  test('registrations per client address are limited per day (429 with Retry-After); another address still registers', async ({
    client,
    assert,
  }) => {
    const previous = identityLimits.signupsPerClientPerDay
    identityLimits.signupsPerClientPerDay = 3
    try {
      const ip = randomIp()
      for (let index = 0; index < 3; index++) {
        const answer = await register(client, `${randomLocal()}@example.test`, ip)
        answer.assertStatus(200)
      }
      const refusedEmail = `${randomLocal()}@example.test`
      const refused = await register(client, refusedEmail, ip)
      refused.assertStatus(429)
      refused.assertBodyContains({ success: false, code: 'RATE_LIMIT_EXCEEDED' })
      assert.isAbove(Number(refused.header('retry-after')), 0)
      assert.isNull(await User.findBy('email', refusedEmail), 'no account was made')

      const elsewhere = await register(client, `${randomLocal()}@example.test`, randomIp())
      elsewhere.assertStatus(200)
    } finally {
      identityLimits.signupsPerClientPerDay = previous
    }
  })

  test('verification mails per client address are limited per hour (429 with Retry-After); another address still asks', async ({
    client,
    assert,
  }) => {
    const previous = identityLimits.verificationMailsPerClientPerHour
    identityLimits.verificationMailsPerClientPerHour = 3
    try {
      const ip = randomIp()
      const resend = (from: string) =>
        client
          .post('/auth/resend-verification')
          .header('x-forwarded-for', from)
          .json({ email: `${randomLocal()}@example.test` })
      for (let index = 0; index < 3; index++) {
        const answer = await resend(ip)
        answer.assertStatus(200)
      }
      const refused = await resend(ip)
      refused.assertStatus(429)
      refused.assertBodyContains({ success: false, code: 'RATE_LIMIT_EXCEEDED' })
      assert.isAbove(Number(refused.header('retry-after')), 0)
      const elsewhere = await resend(randomIp())
      elsewhere.assertStatus(200)
    } finally {
      identityLimits.verificationMailsPerClientPerHour = previous
    }
  })

  test('mailbox aliases fold to one canonical address', ({ assert }) => {
    assert.equal(canonicalEmail('A.Lice+2@GoogleMail.com'), 'alice@gmail.com')
    assert.equal(canonicalEmail('alice+promo@example.com'), 'alice@example.com')
    assert.equal(
      canonicalEmail('a.lice@example.com'),
      'a.lice@example.com',
      'dots matter elsewhere'
    )
  })

  test('a referral pays only for a distinct person: not an alias of the referrer, not the referrer’s network, one reward per mailbox', async ({
    client,
    assert,
  }) => {
    const referrerLocal = randomLocal()
    const referrerIp = randomIp()
    const registered = await register(client, `${referrerLocal}@example.test`, referrerIp)
    registered.assertStatus(200)
    const referrer = await User.findByOrFail('email', `${referrerLocal}@example.test`)
    assert.notEqual(referrer.signupIpHash, referrerIp, 'the address is kept only as a keyed hash')
    assert.match(referrer.signupIpHash!, /^[0-9a-f]{64}$/)
    const code = referrer.referralCode

    const alias = await invitee(client, `${referrerLocal}+2@example.test`, randomIp(), code)
    const sameNetwork = await invitee(client, `${randomLocal()}@example.test`, referrerIp, code)
    const friendLocal = randomLocal()
    const friend = await invitee(client, `${friendLocal}@gmail.com`, randomIp(), code)
    const friendAgain = await invitee(
      client,
      `${friendLocal.slice(0, 3)}.${friendLocal.slice(3)}+x@googlemail.com`,
      randomIp(),
      code
    )

    const claim = await client.post('/referrals/claim').bearerToken(jwtFor(referrer))
    claim.assertStatus(200)
    assert.equal(claim.body().data.claimed, 1, 'one distinct person')
    assert.equal(await creditsOf(friend), 500)
    for (const puppet of [alias, sameNetwork, friendAgain]) {
      assert.equal(await creditsOf(puppet), 0)
    }
    const rewards = await db.from('referral_rewards').where('referrer_id', referrer.id)
    assert.deepEqual(
      rewards.map((row) => row.referred_id),
      [friend.id]
    )
  })

  test('the free monthly grant is one per mailbox: an alias verified later gets none, now or next month; a paying alias gets its plan’s', async ({
    client,
    assert,
  }) => {
    const local = randomLocal()
    const addresses = [`${local}@example.test`, `${local}+farm@example.test`]
    for (const email of addresses) {
      const registered = await register(client, email, randomIp())
      registered.assertStatus(200)
      const link = linkIn(await waitForMail(email), '/auth/verify-email/')
      const verified = await client.get(link.pathname)
      verified.assertStatus(200)
    }
    const [owner, puppet] = await Promise.all(
      addresses.map((email) => User.findByOrFail('email', email))
    )
    const freeGrant = tierPlan('free').aiCreditsMonthly
    assert.isAbove(freeGrant, 0)
    assert.equal(await creditsOf(owner), freeGrant)
    assert.equal(await creditsOf(puppet), 0, 'the alias got no free grant at verification')

    const ownerBalance = await client.get('/ai-credits/balance').bearerToken(jwtFor(owner))
    assert.equal(ownerBalance.body().data.monthlyGrant, freeGrant)
    const puppetBalance = await client.get('/ai-credits/balance').bearerToken(jwtFor(puppet))
    assert.equal(puppetBalance.body().data.monthlyGrant, 0)

    const nextMonth = DateTime.utc().plus({ months: 1 }).startOf('month').plus({ hours: 1 })
    assert.isNull(await grantMonthlyCredits(puppet, { now: nextMonth.toJSDate() }))
    const ownersNext = await grantMonthlyCredits(owner, { now: nextMonth.toJSDate() })
    assert.isTrue(ownersNext?.applied)

    puppet.tier = 'starter'
    puppet.subscriptionExpiresAt = DateTime.utc().plus({ days: 30 })
    await puppet.save()
    const paid = await grantMonthlyCredits(puppet, { now: nextMonth.toJSDate() })
    assert.isTrue(paid?.applied, 'a paying alias gets what its plan grants')
    assert.equal(await creditsOf(puppet), tierPlan('starter').aiCreditsMonthly)
  })
})
