import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import env from '#start/env'
import { verifyPassword } from '#identity/services/password_hashing'
import { createUser, jwtFor, uniqueEmail, uniqueUsername } from '#tests/helpers/identity'
import { linkIn, waitForMail } from '#tests/helpers/mail'

const ATTACKER_PASSWORD = 'attacker-chose-this-1'
const OWNER_PASSWORD = 'the-real-owner-pass-2'

/**
 * Pre-registration takeover (issue 17): someone registers an address that
 * is not theirs and never verifies it; the owner registers and verifies.
 * The verified account must answer to the owner's password only.
 */
test.group('Registration: an unverified registration cannot take over an address', () => {
  test("the owner's verification sets the owner's password, also when the other party registers again meanwhile", async ({
    client,
    assert,
  }) => {
    const email = uniqueEmail('victim')
    const register = async (password: string) => {
      const answer = await client
        .post('/auth/register')
        .json({ email, username: uniqueUsername('r'), password })
      answer.assertStatus(200)
    }
    const login = (password: string) => client.post('/auth/login').json({ email, password })

    await register(ATTACKER_PASSWORD)
    await waitForMail(email, { subject: /verify/i, count: 1 })
    await register(OWNER_PASSWORD)
    const ownersMail = await waitForMail(email, { subject: /verify/i, count: 2 })
    // The other party registers once more before the owner clicks.
    await register(ATTACKER_PASSWORD)
    await waitForMail(email, { subject: /verify/i, count: 3 })

    const verified = await client.get(linkIn(ownersMail, '/auth/verify-email/').pathname)
    assert.isBelow(verified.status(), 400)

    const attacker = await login(ATTACKER_PASSWORD)
    attacker.assertStatus(401)
    const owner = await login(OWNER_PASSWORD)
    owner.assertStatus(200)
  }).timeout(30_000)

  test("a pre-registration leaves nothing on the owner's account: the owner's mail greets the owner, verifying sets the owner's username and referrer", async ({
    client,
    assert,
  }) => {
    const email = uniqueEmail('prereg')
    const attackerName = uniqueUsername('squat')
    const ownerName = uniqueUsername('owner')
    const attackersReferrer = await createUser()
    const attacker = await client.post('/auth/register').json({
      email,
      username: attackerName,
      password: ATTACKER_PASSWORD,
      referralCode: attackersReferrer.referralCode,
    })
    attacker.assertStatus(200)
    await waitForMail(email, { subject: /verify/i, count: 1 })

    const owner = await client
      .post('/auth/register')
      .json({ email, username: ownerName, password: OWNER_PASSWORD })
    owner.assertStatus(200)
    assert.deepEqual(owner.body(), attacker.body(), 'the same answer as a new registration')
    const ownersMail = await waitForMail(email, { subject: /verify/i, count: 2 })
    assert.include(ownersMail.text ?? '', `Hello ${ownerName},`)
    assert.notInclude(ownersMail.text ?? '', attackerName)
    assert.notInclude(ownersMail.html ?? '', attackerName)

    const verified = await client
      .get(linkIn(ownersMail, '/auth/verify-email/').pathname)
      .header('accept', 'application/json')
    verified.assertStatus(200)
    const [account] = await db.from('users').whereRaw('lower(email) = ?', [email])
    assert.equal(account.username, ownerName)
    assert.isNull(account.referred_by_id, "the attacker's referrer is gone")
    assert.isNotNull(account.email_verified_at)
    // The squatted name is free again.
    assert.lengthOf(await db.from('users').where('username', attackerName), 0)
    const stats = await client.get('/referrals/stats').bearerToken(jwtFor(attackersReferrer))
    stats.assertStatus(200)
    assert.equal(stats.body().data.totalReferred, 0)
  }).timeout(30_000)

  test("a pre-registration under the owner's own username does not keep the owner from registering with it", async ({
    client,
    assert,
  }) => {
    const email = uniqueEmail('samename')
    const name = uniqueUsername('mine')
    const first = await client
      .post('/auth/register')
      .json({ email, username: name, password: ATTACKER_PASSWORD })
    first.assertStatus(200)
    await waitForMail(email, { subject: /verify/i, count: 1 })
    const again = await client
      .post('/auth/register')
      .json({ email, username: name, password: OWNER_PASSWORD })
    again.assertStatus(200)
    const ownersMail = await waitForMail(email, { subject: /verify/i, count: 2 })
    const verified = await client
      .get(linkIn(ownersMail, '/auth/verify-email/').pathname)
      .header('accept', 'application/json')
    verified.assertStatus(200)
    const login = await client.post('/auth/login').json({ email, password: OWNER_PASSWORD })
    login.assertStatus(200)
    assert.equal(login.body().data.user.username, name)
    // Another address still cannot take the name.
    const other = await client
      .post('/auth/register')
      .json({ email: uniqueEmail('other'), username: name, password: OWNER_PASSWORD })
    other.assertStatus(400)
  }).timeout(30_000)

  test('an ADMIN_EMAILS address: the pending registration never holds admin; after the owner verifies only the owner signs in, as the one admin', async ({
    client,
    assert,
  }) => {
    const email = uniqueEmail('boss')
    const before = env.get('ADMIN_EMAILS')
    env.set('ADMIN_EMAILS', `someone-else@example.test, ${email}`)
    try {
      const register = async (password: string) => {
        const answer = await client
          .post('/auth/register')
          .json({ email, username: uniqueUsername('r'), password })
        answer.assertStatus(200)
      }
      const login = (password: string) => client.post('/auth/login').json({ email, password })
      const accounts = () => db.from('users').whereRaw('lower(email) = ?', [email])

      await register(ATTACKER_PASSWORD)
      const attackersMail = await waitForMail(email, { subject: /verify/i, count: 1 })
      const pending = await accounts()
      assert.lengthOf(pending, 1)
      assert.equal(pending[0].role, 'user', 'a pending registration is no admin')
      assert.isNull(pending[0].email_verified_at)
      const early = await login(ATTACKER_PASSWORD)
      early.assertStatus(403)
      assert.equal(early.body().code, 'EMAIL_NOT_VERIFIED')
      assert.notProperty(early.body(), 'data', 'no session for the pending registration')

      await register(OWNER_PASSWORD)
      const ownersMail = await waitForMail(email, { subject: /verify/i, count: 2 })
      const verified = await client
        .get(linkIn(ownersMail, '/auth/verify-email/').pathname)
        .header('accept', 'application/json')
      verified.assertStatus(200)

      const attacker = await login(ATTACKER_PASSWORD)
      attacker.assertStatus(401)
      const owner = await login(OWNER_PASSWORD)
      owner.assertStatus(200)

      // The attacker's own link, followed after the owner verified (by the owner, by
      // mistake), changes nothing: the account keeps the owner's password.
      const late = await client
        .get(linkIn(attackersMail, '/auth/verify-email/').pathname)
        .header('accept', 'application/json')
      assert.isBelow(late.status(), 500)
      const attackerAgain = await login(ATTACKER_PASSWORD)
      attackerAgain.assertStatus(401)

      // One account holds the address: verified, admin, answering to the owner's password only.
      const rows = await accounts()
      assert.lengthOf(rows, 1)
      assert.equal(rows[0].role, 'admin')
      assert.isNotNull(rows[0].email_verified_at)
      assert.isTrue(await verifyPassword(rows[0].password, OWNER_PASSWORD))
      assert.isFalse(await verifyPassword(rows[0].password, ATTACKER_PASSWORD))
      assert.equal(owner.body().data.user.id, rows[0].id)

      // The admin role works for the owner's session.
      const target = await createUser()
      const grant = await client
        .post('/ai-credits/grant')
        .bearerToken(owner.body().data.token)
        .json({ userId: target.id, credits: 10, reason: 'owner is the admin' })
      grant.assertStatus(200)
    } finally {
      env.set('ADMIN_EMAILS', before ?? '')
    }
  }).timeout(30_000)
})
