import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { exportSections } from '#identity/services/export_sections'
import notificationService from '#identity/services/notification_service'
import creditLedger from '#credits/services/credit_ledger'
import { apiKeyFor, createUser, jwtFor, TEST_PASSWORD } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import { linkIn, waitForMail } from '#tests/helpers/mail'
import { readZip } from '#tests/helpers/zip'
import type User from '#identity/models/user'

/** Users whose export should carry the extra test section. */
const withExtraSection = new Set<string>()

// Another area's section, registered the way agents/billing/chat add theirs.
exportSections.register('zz_test_extension', async (userId) =>
  withExtraSection.has(userId)
    ? {
        userId,
        providerApiKey: 'sk-live-should-not-leak',
        nested: { botToken: 'tg-secret' },
        plain: 'kept',
      }
    : null
)

async function signIn(user: User) {
  const response = await fetch(`${baseUrl()}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: user.email, password: TEST_PASSWORD }),
  })
  const body = (await response.json()) as any
  return body.data as { token: string; refreshToken: string }
}

async function exportAndWaitForLink(client: any, user: User) {
  const response = await client.post('/auth/export-data').bearerToken(jwtFor(user))
  response.assertStatus(200)
  const mail = await waitForMail(user.email, { subject: /export/i })
  const link = linkIn(mail, '/auth/export-data/')
  return `${link.pathname}${link.search}`
}

async function download(path: string, headers: Record<string, string> = {}) {
  const response = await fetch(`${baseUrl()}${path}`, { headers })
  const buffer = Buffer.from(await response.arrayBuffer())
  return { status: response.status, headers: response.headers, buffer }
}

test.group('Data export', () => {
  test('answers processing at once, mails a signed link, serves a ZIP of the data without secrets', async ({
    client,
    assert,
  }) => {
    const user = await createUser({ credits: 700 })
    withExtraSection.add(user.id)
    const apiKey = await apiKeyFor(user, 'export-check')
    const session = await signIn(user)
    await notificationService.notify(user.id, { type: 'hello', title: 'Hi', body: 'there' })
    await creditLedger.debit(user.id, 3, {
      kind: 'llm',
      provider: 'p',
      model: 'm',
      inputTokens: 1,
      outputTokens: 2,
    })
    await client
      .post('/support/tickets')
      .bearerToken(session.token)
      .json({ subject: 'Export me', body: 'Ticket body text', category: 'account' })

    const response = await client.post('/auth/export-data').bearerToken(session.token)
    response.assertStatus(200)
    assert.equal(response.body().data.status, 'processing')
    assert.isString(response.body().data.message)

    const mail = await waitForMail(user.email, { subject: /export/i })
    const link = linkIn(mail, '/auth/export-data/')
    assert.match(link.search, /signature=/)
    const path = `${link.pathname}${link.search}`

    const zip = await download(path, { authorization: `Bearer ${session.token}` })
    assert.equal(zip.status, 200)
    assert.match(
      zip.headers.get('content-disposition') ?? '',
      /attachment; filename="?agent-host-export-/
    )
    const files = readZip(zip.buffer)
    assert.includeMembers(Object.keys(files), [
      'manifest.json',
      'profile.json',
      'api_keys.json',
      'notifications.json',
      'support_tickets.json',
      'credit_ledger.json',
      'zz_test_extension.json',
    ])

    const json = (name: string) => JSON.parse(files[name].toString('utf8'))
    assert.equal(json('profile.json').email, user.email)
    assert.equal(json('profile.json').id, user.id)
    assert.equal(json('api_keys.json')[0].label, 'export-check')
    assert.isTrue(json('notifications.json').some((n: any) => n.title === 'Hi'))
    assert.equal(json('support_tickets.json')[0].body, 'Ticket body text')
    assert.deepEqual(
      json('credit_ledger.json').map((e: any) => e.credits),
      [700, -3]
    )
    assert.deepEqual(json('zz_test_extension.json'), {
      userId: user.id,
      providerApiKey: '***',
      nested: { botToken: '***' },
      plain: 'kept',
    })

    const everything = Object.values(files)
      .map((f) => f.toString('utf8'))
      .join('\n')
    const stored = await db.from('users').where('id', user.id).first()
    for (const secret of [
      apiKey,
      apiKey.split('.')[1],
      session.refreshToken,
      session.token,
      stored.password,
      TEST_PASSWORD,
      'sk-live-should-not-leak',
      'tg-secret',
    ]) {
      assert.notInclude(everything, secret)
    }
    assert.notMatch(everything, /\$scrypt\$/)
  })

  test('the link serves the owner only, and only with its signature', async ({
    client,
    assert,
  }) => {
    const owner = await createUser()
    const stranger = await createUser()
    const session = await signIn(owner)
    const path = await exportAndWaitForLink(client, owner)

    const anonymous = await download(path)
    assert.equal(anonymous.status, 401)
    assert.equal(JSON.parse(anonymous.buffer.toString()).code, 'AUTH_REQUIRED')

    const foreign = await download(path, { authorization: `Bearer ${jwtFor(stranger)}` })
    assert.equal(foreign.status, 403)

    const apiKey = await download(path, { authorization: `Bearer ${await apiKeyFor(owner)}` })
    assert.equal(apiKey.status, 401)

    const unsigned = await download(path.split('?')[0], {
      authorization: `Bearer ${session.token}`,
    })
    assert.equal(unsigned.status, 403)
    const tampered = await download(path.replace(/signature=([^&]{6})/, 'signature=AAAAAA'), {
      authorization: `Bearer ${session.token}`,
    })
    assert.equal(tampered.status, 403)

    // A signature for one export does not open another.
    const otherPath = path.replace(
      /\/auth\/export-data\/[^/]+\//,
      `/auth/export-data/${crypto.randomUUID()}/`
    )
    const swapped = await download(otherPath, { authorization: `Bearer ${session.token}` })
    assert.equal(swapped.status, 403)

    // A browser clicking the mailed link sends its HttpOnly session cookie.
    const browser = await download(path, { cookie: `platform_refresh=${session.refreshToken}` })
    assert.equal(browser.status, 200)
    assert.equal(browser.headers.get('content-type'), 'application/zip')
    const strangerSession = await signIn(stranger)
    const strangerBrowser = await download(path, {
      cookie: `platform_refresh=${strangerSession.refreshToken}`,
    })
    assert.equal(strangerBrowser.status, 403)
  })

  test('an expired export answers 410 GONE', async ({ client, assert }) => {
    const owner = await createUser()
    const path = await exportAndWaitForLink(client, owner)
    await db
      .from('data_exports')
      .where('user_id', owner.id)
      .update({ expires_at: new Date(Date.now() - 1000) })
    const response = await download(path, { authorization: `Bearer ${jwtFor(owner)}` })
    assert.equal(response.status, 410)
    assert.equal(JSON.parse(response.buffer.toString()).code, 'GONE')
  })

  test('one export at a time, and none within an hour of the last one sent: 429 with Retry-After', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const jwt = jwtFor(user)
    const results = await Promise.all(
      Array.from({ length: 3 }, () => client.post('/auth/export-data').bearerToken(jwt))
    )
    const statuses = results.map((r) => r.status()).sort()
    assert.deepEqual(statuses, [200, 429, 429])
    const busy = results.find((r) => r.status() === 429)!
    assert.equal(busy.body().code, 'RATE_LIMIT_EXCEEDED')
    assert.isAbove(Number(busy.header('retry-after')), 0)

    // Sent (the row is ready before the mail goes out): not again within the hour.
    await waitForMail(user.email, { subject: /export/i })
    const again = await client.post('/auth/export-data').bearerToken(jwt)
    again.assertStatus(429)
    assert.equal(again.body().code, 'RATE_LIMIT_EXCEEDED')
    const retryAfter = Number(again.header('retry-after'))
    assert.isAbove(retryAfter, 3500)
    assert.isAtMost(retryAfter, 3600)

    // An hour later it may start again.
    await db
      .from('data_exports')
      .where('user_id', user.id)
      .update({ created_at: new Date(Date.now() - 61 * 60 * 1000) })
    const later = await client.post('/auth/export-data').bearerToken(jwt)
    later.assertStatus(200)
    await waitForMail(user.email, { subject: /export/i, count: 2 })
  })

  test('a job turning ready while a request checks does not let a second one start', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const [job] = await db
      .table('data_exports')
      .insert({
        id: crypto.randomUUID(),
        user_id: user.id,
        status: 'processing',
        created_at: new Date(),
      })
      .returning('id')
    // The job's move to ready, not yet committed: an insert that passed a
    // check for ready jobs only would wait on it, then succeed.
    const turningReady = await db.transaction()
    await turningReady.from('data_exports').where('id', job.id).update({ status: 'ready' })
    const answer = Promise.resolve(client.post('/auth/export-data').bearerToken(jwtFor(user)))
    await new Promise((resolve) => setTimeout(resolve, 300))
    await turningReady.commit()

    const response = await answer
    response.assertStatus(429)
    assert.equal(response.body().code, 'RATE_LIMIT_EXCEEDED')
    const jobs = await db.from('data_exports').where('user_id', user.id)
    assert.lengthOf(jobs, 1)
  })

  test('export needs a JWT', async ({ client }) => {
    const response = await client.post('/auth/export-data')
    response.assertStatus(401)
  })
})
