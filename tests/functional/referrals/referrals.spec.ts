import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { appUrl } from '#config/app'
import { createUser, creditsOf, jwtFor, uniqueEmail, uniqueUsername } from '#tests/helpers/identity'
import { createAgentFor } from '#tests/helpers/agents_fixture'

test.group('Referrals', () => {
  test('my-code: the code, a share link on APP_URL carrying it, the username', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const response = await client.get('/referrals/my-code').bearerToken(jwtFor(user))
    response.assertStatus(200)
    const data = response.body().data
    assert.equal(data.referralCode, user.referralCode)
    assert.equal(data.username, user.username)
    assert.isTrue(data.shareLink.startsWith(appUrl))
    assert.include(data.shareLink, user.referralCode)
    assert.doesNotThrow(() => new URL(data.shareLink))
  })

  test('validate is public: the referrer for a real code, invalid otherwise', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const valid = await client.get(`/referrals/validate/${user.referralCode}`)
    valid.assertStatus(200)
    assert.deepEqual(valid.body().data, { valid: true, referrerUsername: user.username })
    const lower = await client.get(`/referrals/validate/${user.referralCode.toLowerCase()}`)
    assert.deepEqual(lower.body().data, { valid: true, referrerUsername: user.username })
    const unknown = await client.get('/referrals/validate/NOSUCHCODE9')
    unknown.assertStatus(200)
    assert.deepEqual(unknown.body().data, { valid: false, referrerUsername: null })
  })

  test('registration with a code links the accounts; stats list them', async ({
    client,
    assert,
  }) => {
    const referrer = await createUser()
    const username = uniqueUsername('friend')
    const registered = await client.post('/auth/register').json({
      email: uniqueEmail('friend'),
      username,
      password: 'correct-horse-battery-staple',
      referralCode: referrer.referralCode,
    })
    registered.assertStatus(200)
    await createUser({ referredById: referrer.id })

    const response = await client.get('/referrals/stats').bearerToken(jwtFor(referrer))
    response.assertStatus(200)
    const data = response.body().data
    assert.equal(data.totalReferred, 2)
    assert.equal(data.totalEarned, 0)
    assert.equal(data.rewardPerReferral, 500)
    assert.equal(data.rewardUnit, 'ai_credits')
    assert.lengthOf(data.referrals, 2)
    assert.includeMembers(
      data.referrals.map((entry: any) => entry.username),
      [username]
    )
    for (const entry of data.referrals) {
      assert.isFalse(entry.rewardClaimed)
      assert.equal(new Date(entry.date).toISOString(), entry.date)
    }
  })

  test('claim pays only eligible referrals (verified and with an agent), 500 to each side, once', async ({
    client,
    assert,
  }) => {
    const referrer = await createUser()
    const eligible = await createUser({ referredById: referrer.id })
    await createAgentFor(eligible)
    const unverified = await createUser({ referredById: referrer.id, verified: false })
    await createAgentFor(unverified)
    const agentless = await createUser({ referredById: referrer.id })

    const response = await client.post('/referrals/claim').bearerToken(jwtFor(referrer))
    response.assertStatus(200)
    assert.deepEqual(response.body().data, {
      claimed: 1,
      totalCredited: 500,
      referredCredited: 500,
      totalAiCreditsGranted: 1000,
      unit: 'ai_credits',
      message: response.body().data.message,
    })
    assert.equal(await creditsOf(referrer), 500)
    assert.equal(await creditsOf(eligible), 500)
    assert.equal(await creditsOf(unverified), 0)
    assert.equal(await creditsOf(agentless), 0)
    const entries = await db
      .from('credit_ledger')
      .whereIn('user_id', [referrer.id, eligible.id])
      .where('kind', 'referral')
    assert.lengthOf(entries, 2)

    const again = await client.post('/referrals/claim').bearerToken(jwtFor(referrer))
    assert.equal(again.body().data.claimed, 0)
    assert.equal(await creditsOf(referrer), 500)

    const stats = await client.get('/referrals/stats').bearerToken(jwtFor(referrer))
    assert.equal(stats.body().data.totalEarned, 500)
    const paid = stats
      .body()
      .data.referrals.find((entry: any) => entry.username === eligible.username)
    assert.isTrue(paid.rewardClaimed)
  })

  test('concurrent claims pay each referral exactly once', async ({ client, assert }) => {
    const referrer = await createUser()
    const friends = []
    for (let i = 0; i < 3; i++) {
      const friend = await createUser({ referredById: referrer.id })
      await createAgentFor(friend)
      friends.push(friend)
    }
    const jwt = jwtFor(referrer)
    const responses = await Promise.all(
      Array.from({ length: 6 }, () => client.post('/referrals/claim').bearerToken(jwt))
    )
    for (const response of responses) response.assertStatus(200)
    const claimed = responses.reduce((sum, response) => sum + response.body().data.claimed, 0)
    assert.equal(claimed, 3)
    assert.equal(await creditsOf(referrer), 1500)
    for (const friend of friends) assert.equal(await creditsOf(friend), 500)
    const rewards = await db.from('referral_rewards').where('referrer_id', referrer.id)
    assert.lengthOf(rewards, 3)
  })

  test('my-code, stats and claim need a JWT', async ({ client }) => {
    const myCode = await client.get('/referrals/my-code')
    myCode.assertStatus(401)
    const stats = await client.get('/referrals/stats')
    stats.assertStatus(401)
    const claim = await client.post('/referrals/claim')
    claim.assertStatus(401)
  })
})
