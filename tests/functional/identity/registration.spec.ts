import { chmod, mkdir, readdir, stat } from 'node:fs/promises'
import { extname, join } from 'node:path'
import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import env from '#start/env'
import { tiers } from '#config/plans'
import User from '#identity/models/user'
import { createUser, TEST_PASSWORD, uniqueEmail, uniqueUsername } from '#tests/helpers/identity'
import { linkIn, mailDir, mailsTo, waitForMail } from '#tests/helpers/mail'
import { mailFileTag } from '#identity/services/file_mail_transport'

const PASSWORD = 'a-long-enough-password'

async function roleOf(email: string) {
  const user = await User.findByOrFail('email', email)
  return user.role
}

async function registerAndGetLink(client: any, email: string, extra: Record<string, unknown> = {}) {
  const response = await client
    .post('/auth/register')
    .json({ email, username: uniqueUsername('reg'), password: PASSWORD, ...extra })
  response.assertStatus(200)
  const mail = await waitForMail(email, { subject: /verify/i })
  return linkIn(mail, '/auth/verify-email/')
}

test.group('Registration and e-mail verification', () => {
  test('register, verify by the mailed link, then sign in', async ({ client, assert }) => {
    const email = uniqueEmail('Flow').replace('flow', 'FlOw')
    const username = uniqueUsername('flow')
    const response = await client
      .post('/auth/register')
      .json({ email: `  ${email.toUpperCase()} `, username, password: PASSWORD })
    response.assertStatus(200)
    assert.deepEqual(Object.keys(response.body().data).sort(), [
      'message',
      'registered',
      'requiresVerification',
    ])
    assert.isTrue(response.body().data.registered)
    assert.isTrue(response.body().data.requiresVerification)
    assert.notProperty(response.body().data, 'token')

    // Stored lower-case, unverified, free, no credits yet.
    const stored = await User.findByOrFail('email', email.toLowerCase())
    assert.equal(stored.username, username)
    assert.equal(stored.tier, 'free')
    assert.equal(stored.role, 'user')
    assert.isNull(stored.emailVerifiedAt)
    assert.isNull(stored.walletAddress)
    assert.match(stored.referralCode, /^[A-Z0-9]{8,16}$/)
    assert.notEqual(stored.password, PASSWORD)
    assert.match(stored.password, /^\$scrypt\$/)

    // Not signed in before verification.
    const early = await client.post('/auth/login').json({ email, password: PASSWORD })
    early.assertStatus(403)
    assert.equal(early.body().code, 'EMAIL_NOT_VERIFIED')

    const mail = await waitForMail(email.toLowerCase(), { subject: /verify/i })
    const link = linkIn(mail, '/auth/verify-email/')
    assert.notInclude(mail.text ?? '', PASSWORD)

    const verified = await client.get(link.pathname).header('accept', 'application/json')
    verified.assertStatus(200)
    assert.isTrue(verified.body().data.verified)

    await stored.refresh()
    assert.isNotNull(stored.emailVerifiedAt)
    // The tier's monthly grant, read from the catalogue, through the ledger.
    assert.equal(stored.aiCreditsBalance, tiers.free.aiCreditsMonthly)
    const ledger = await db.from('credit_ledger').where('user_id', stored.id)
    assert.lengthOf(ledger, 1)
    assert.equal(ledger[0].kind, 'monthly')
    assert.equal(ledger[0].credits, tiers.free.aiCreditsMonthly)

    const login = await client
      .post('/auth/login')
      .json({ email: email.toUpperCase(), password: PASSWORD })
    login.assertStatus(200)
    assert.deepEqual(login.body().data.user, {
      id: stored.id,
      email: email.toLowerCase(),
      username,
      tier: 'free',
    })

    const notes = await client.get('/auth/notifications').bearerToken(login.body().data.token)
    assert.deepEqual(
      notes.body().data.notifications.map((n: any) => n.type),
      ['welcome']
    )
  })

  test('mail files holding live links are 0600, in a 0700 folder', async ({ client, assert }) => {
    const dir = mailDir()
    await mkdir(dir, { recursive: true })
    // As an older version (or a hand-made folder) may have left it: readable by everyone.
    await chmod(dir, 0o755)
    const email = uniqueEmail('modes')
    await registerAndGetLink(client, email)

    const tag = mailFileTag(email)
    const listed = await readdir(dir)
    const files = listed.filter((file) => file.includes(`-${tag}.`))
    assert.sameMembers(
      files.map((file) => extname(file)),
      ['.eml', '.json'],
      'the mail whole, no .partial left behind'
    )
    for (const file of files) {
      const { mode } = await stat(join(dir, file))
      assert.equal((mode & 0o777).toString(8), '600', `${file} is 0600`)
    }
    const folder = await stat(dir)
    assert.equal((folder.mode & 0o777).toString(8), '700', 'the mail folder is 0700')
  })

  test('the verification link works once; following it again changes nothing', async ({
    client,
    assert,
  }) => {
    const email = uniqueEmail('once')
    const link = await registerAndGetLink(client, email)

    const html = await client.get(link.pathname).header('accept', 'text/html')
    html.assertStatus(200)
    assert.match(html.header('content-type') ?? '', /text\/html/)
    assert.include(html.text(), 'verified')

    const again = await client.get(link.pathname).header('accept', 'application/json')
    again.assertStatus(200)
    assert.isTrue(again.body().data.verified)

    const user = await User.findByOrFail('email', email)
    assert.equal(user.aiCreditsBalance, tiers.free.aiCreditsMonthly)
    const grants = await db.from('credit_ledger').where('user_id', user.id)
    assert.lengthOf(grants, 1)
  })

  test('unknown, malformed and expired verification links are refused', async ({
    client,
    assert,
  }) => {
    const unknown = await client
      .get('/auth/verify-email/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')
      .header('accept', 'application/json')
    unknown.assertStatus(400)
    assert.equal(unknown.body().code, 'VALIDATION_ERROR')

    const malformed = await client.get('/auth/verify-email/x').header('accept', 'application/json')
    malformed.assertStatus(400)

    const email = uniqueEmail('expired')
    const link = await registerAndGetLink(client, email)
    const user = await User.findByOrFail('email', email)
    await db
      .from('email_verification_tokens')
      .where('user_id', user.id)
      .update({ expires_at: new Date(Date.now() - 1000) })
    const expired = await client.get(link.pathname).header('accept', 'application/json')
    expired.assertStatus(400)
    const page = await client.get(link.pathname).header('accept', 'text/html')
    page.assertStatus(400)
    assert.match(page.header('content-type') ?? '', /text\/html/)
    await user.refresh()
    assert.isNull(user.emailVerifiedAt)
  })

  test('a taken address gets the same status and body, and no second account', async ({
    client,
    assert,
  }) => {
    const existing = await createUser()
    const fresh = uniqueEmail('fresh')

    const forFree = await client
      .post('/auth/register')
      .json({ email: fresh, username: uniqueUsername('a'), password: PASSWORD })
    const forTaken = await client.post('/auth/register').json({
      email: existing.email.toUpperCase(),
      username: uniqueUsername('b'),
      password: PASSWORD,
    })

    assert.equal(forTaken.status(), forFree.status())
    assert.deepEqual(forTaken.body(), forFree.body())
    const count = await db
      .from('users')
      .whereRaw('lower(email) = ?', [existing.email])
      .count('* as n')
    assert.equal(Number(count[0].n), 1)

    // The owner of the taken address is told by mail instead.
    const notice = await waitForMail(existing.email, { subject: /account/i })
    assert.notMatch(notice.subject, /verify/i)
  })

  test('registration takes comparable time for a free and a taken address', async ({
    client,
    assert,
  }) => {
    const existing = await createUser()
    const time = async (email: string) => {
      const started = performance.now()
      const response = await client
        .post('/auth/register')
        .json({ email, username: uniqueUsername('t'), password: PASSWORD })
      response.assertStatus(200)
      return performance.now() - started
    }
    // Warm up, then compare medians of three.
    await time(uniqueEmail('warm'))
    const free: number[] = []
    const taken: number[] = []
    for (let i = 0; i < 3; i++) {
      free.push(await time(uniqueEmail('timing')))
      taken.push(await time(existing.email))
    }
    const median = (values: number[]) => values.sort((a, b) => a - b)[1]
    const ratio = median(taken) / median(free)
    assert.isAbove(ratio, 0.25, `taken ${median(taken)}ms vs free ${median(free)}ms`)
    assert.isBelow(ratio, 4, `taken ${median(taken)}ms vs free ${median(free)}ms`)
  })

  test('an unverified address that registers again gets a new link', async ({ client, assert }) => {
    const email = uniqueEmail('again')
    const firstLink = await registerAndGetLink(client, email)
    const second = await client
      .post('/auth/register')
      .json({ email, username: uniqueUsername('again'), password: PASSWORD })
    second.assertStatus(200)
    const mail = await waitForMail(email, { subject: /verify/i, count: 2 })
    const link = linkIn(mail, '/auth/verify-email/')
    assert.notEqual(link.pathname, firstLink.pathname)
    const verified = await client.get(link.pathname).header('accept', 'application/json')
    verified.assertStatus(200)
  })

  test('a taken username is 400 VALIDATION_ERROR naming the field', async ({ client, assert }) => {
    const existing = await createUser()
    const response = await client
      .post('/auth/register')
      .json({ email: uniqueEmail('dupname'), username: existing.username, password: PASSWORD })
    response.assertStatus(400)
    assert.equal(response.body().code, 'VALIDATION_ERROR')
    assert.include(response.body().error, 'username')
  })

  test('{field} is validated: {why}')
    .with([
      { field: 'email', why: 'not an address', body: { email: 'nope' } },
      { field: 'username', why: 'upper case', body: { username: 'Ada_L' } },
      { field: 'username', why: 'too short', body: { username: 'ab' } },
      { field: 'username', why: 'too long', body: { username: 'a'.repeat(31) } },
      { field: 'username', why: 'punctuation', body: { username: 'ada-l' } },
      { field: 'password', why: 'too short', body: { password: 'short7!' } },
      { field: 'password', why: 'too long', body: { password: 'p'.repeat(129) } },
    ])
    .run(async ({ client, assert }, row) => {
      const response = await client.post('/auth/register').json({
        email: uniqueEmail('v'),
        username: uniqueUsername('v'),
        password: PASSWORD,
        ...row.body,
      })
      response.assertStatus(400)
      assert.equal(response.body().code, 'VALIDATION_ERROR')
      assert.include(response.body().error, row.field)
    })

  test('boundary lengths are accepted', async ({ client }) => {
    const response = await client.post('/auth/register').json({
      email: uniqueEmail('edge'),
      username: `z${uniqueUsername('e')}`.padEnd(30, '9').slice(0, 30),
      password: 'p'.repeat(128),
    })
    response.assertStatus(200)
    const short = await client.post('/auth/register').json({
      email: uniqueEmail('edge'),
      username: uniqueUsername('e'),
      password: '12345678',
    })
    short.assertStatus(200)
  })

  test('a referral code links the new account to its referrer', async ({ client, assert }) => {
    const referrer = await createUser()
    const email = uniqueEmail('referred')
    await client
      .post('/auth/register')
      .json({
        email,
        username: uniqueUsername('ref'),
        password: PASSWORD,
        referralCode: referrer.referralCode.toLowerCase(),
      })
      .then((r: any) => r.assertStatus(200))
    const user = await User.findByOrFail('email', email)
    assert.equal(user.referredById, referrer.id)

    const unknownCode = uniqueEmail('badref')
    const response = await client.post('/auth/register').json({
      email: unknownCode,
      username: uniqueUsername('ref'),
      password: PASSWORD,
      referralCode: 'NOSUCHCODE',
    })
    response.assertStatus(200)
    const unreferred = await User.findByOrFail('email', unknownCode)
    assert.isNull(unreferred.referredById)
  })

  test('ADMIN_EMAILS addresses become admin when they verify', async ({ client, assert }) => {
    const email = uniqueEmail('boss')
    const before = env.get('ADMIN_EMAILS')
    env.set('ADMIN_EMAILS', `someone@example.test, ${email.toUpperCase()}`)
    try {
      const link = await registerAndGetLink(client, email)
      assert.equal(await roleOf(email), 'user')
      await client.get(link.pathname).header('accept', 'application/json')
      assert.equal(await roleOf(email), 'admin')
    } finally {
      env.set('ADMIN_EMAILS', before ?? '')
    }
    const other = uniqueEmail('notboss')
    const link = await registerAndGetLink(client, other)
    await client.get(link.pathname).header('accept', 'application/json')
    assert.equal(await roleOf(other), 'user')
  })

  test('resend-verification is neutral, sends a new link, and is rate limited', async ({
    client,
    assert,
  }) => {
    const unknown = await client
      .post('/auth/resend-verification')
      .json({ email: uniqueEmail('nobody') })
    const verifiedUser = await createUser()
    const verified = await client
      .post('/auth/resend-verification')
      .json({ email: verifiedUser.email })
    const email = uniqueEmail('resend')
    await registerAndGetLink(client, email)
    const pending = await client.post('/auth/resend-verification').json({ email })

    for (const response of [unknown, verified, pending]) response.assertStatus(200)
    assert.deepEqual(unknown.body(), pending.body())
    assert.deepEqual(verified.body(), pending.body())

    const second = await waitForMail(email, { subject: /verify/i, count: 2 })
    assert.lengthOf(await mailsTo(verifiedUser.email), 0)

    // A resend replaces earlier resent links; the registration's own link stays valid
    // (it carries that registration's password: see registration_takeover.spec.ts).
    await client.post('/auth/resend-verification').json({ email })
    const third = await waitForMail(email, { subject: /verify/i, count: 3 })
    const superseded = await client
      .get(linkIn(second, '/auth/verify-email/').pathname)
      .header('accept', 'application/json')
    superseded.assertStatus(400)
    const fresh = await client
      .get(linkIn(third, '/auth/verify-email/').pathname)
      .header('accept', 'application/json')
    fresh.assertStatus(200)

    const target = uniqueEmail('flood')
    const statuses: number[] = []
    for (let i = 0; i < 6; i++) {
      const response = await client.post('/auth/resend-verification').json({ email: target })
      statuses.push(response.status())
      if (response.status() === 429) assert.equal(response.body().code, 'RATE_LIMIT_EXCEEDED')
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429])
  })

  test('the test helper password signs in a helper-made account', async ({ client }) => {
    const user = await createUser()
    const login = await client
      .post('/auth/login')
      .json({ email: user.email, password: TEST_PASSWORD })
    login.assertStatus(200)
  })
})
