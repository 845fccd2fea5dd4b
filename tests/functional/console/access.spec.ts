import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import User from '#identity/models/user'
import Agent from '#agents/models/agent'
import {
  agentOwners,
  createFixtureAgent,
  runtime,
  waitUntilServing,
} from '#tests/helpers/agents_http'
import { createUser, jwtFor } from '#tests/helpers/identity'
import { ConsoleVisitor, locationOf, statusOf, totpCode } from '#tests/helpers/console'
import { baseUrl } from '#tests/helpers/http'

async function balanceStatus(jwt: string): Promise<number> {
  const answer = await fetch(`${baseUrl()}/ai-credits/balance`, {
    headers: { authorization: `Bearer ${jwt}` },
  })
  await answer.body?.cancel()
  return answer.status
}

/** Every console page and form, with the least role that may use it. */
const PAGES = [
  { path: '/console', role: 'support' },
  { path: '/console/accounts', role: 'support' },
  { path: '/console/agents', role: 'support' },
  { path: '/console/support', role: 'support' },
  { path: '/console/payments', role: 'support' },
  { path: '/console/audit', role: 'admin' },
] as const

const RANK = { user: 0, support: 1, operator: 2, admin: 3 } as const

test.group('Console: sign-in and role gates', () => {
  test('a user account gets a 403 page, not the console', async ({ assert }) => {
    const visitor = new ConsoleVisitor()
    const answer = await visitor.signIn(await createUser({ role: 'user' }))
    assert.equal(answer.status, 403)
    assert.include(answer.html, 'no console access')
    const overview = await visitor.get('/console')
    assert.equal(overview.status, 302)
    assert.equal(overview.location, '/console/login')
  })

  test('pages need a session', async ({ assert }) => {
    for (const { path } of PAGES) {
      const answer = await new ConsoleVisitor().get(path)
      assert.equal(answer.status, 302, path)
      assert.equal(answer.location, '/console/login', path)
    }
  })

  test('{role} reaches exactly the pages of its role')
    .with(['support', 'operator', 'admin'] as const)
    .run(async ({ assert }, role) => {
      const visitor = await ConsoleVisitor.signedIn(await createUser({ role }))
      for (const page of PAGES) {
        const answer = await visitor.get(page.path)
        const allowed = RANK[role] >= RANK[page.role]
        assert.equal(answer.status, allowed ? 200 : 403, `${role} ${page.path}`)
      }
    })

  test('operators and admins set up TOTP at first sign-in and need a code afterwards', async ({
    assert,
  }) => {
    const operator = await createUser({ role: 'operator' })
    const first = new ConsoleVisitor()
    await first.get('/console/login')
    const login = await first.post('/console/login', {
      email: operator.email,
      password: 'correct-horse-battery',
    })
    assert.equal(login.location, '/console/totp/setup')
    // No way around the setup page.
    assert.equal(await locationOf(first.get('/console')), '/console/login')
    const setup = await first.get('/console/totp/setup')
    assert.match(setup.html, /src="data:image\/png;base64,/)
    const secret = /id="totp-secret">([A-Z2-7]+)</.exec(setup.html)![1]
    const wrong = await first.post('/console/totp/setup', { code: '000000' })
    assert.equal(wrong.location, '/console/totp/setup')
    const done = await first.post('/console/totp/setup', { code: totpCode(operator.email, secret) })
    assert.equal(done.status, 200)
    const codes = [...done.html.matchAll(/<code>([0-9a-f-]{23})<\/code>/g)].map((m) => m[1])
    assert.lengthOf(codes, 10)
    assert.equal(await statusOf(first.get('/console')), 200)

    const stored = await User.findOrFail(operator.id)
    assert.isNotNull(stored.totpEnabledAt)
    assert.notInclude(String(stored.totpSecretEncrypted), secret)

    // Second sign-in: password, then a code (or a recovery code, once).
    const second = new ConsoleVisitor()
    await second.get('/console/login')
    const step = await second.post('/console/login', {
      email: operator.email,
      password: 'correct-horse-battery',
    })
    assert.equal(step.location, '/console/login/totp')
    assert.equal(await locationOf(second.get('/console')), '/console/login')
    await second.get('/console/login/totp')
    assert.equal(
      await locationOf(second.post('/console/login/totp', { code: '123456' })),
      '/console/login/totp'
    )
    const ok = await second.post('/console/login/totp', { code: codes[0] })
    assert.equal(ok.location, '/console')

    const third = new ConsoleVisitor()
    await third.get('/console/login')
    await third.post('/console/login', { email: operator.email, password: 'correct-horse-battery' })
    await third.get('/console/login/totp')
    assert.equal(
      await locationOf(third.post('/console/login/totp', { code: codes[0] })),
      '/console/login/totp'
    )
    assert.equal(
      await locationOf(
        third.post('/console/login/totp', { code: totpCode(operator.email, secret) })
      ),
      '/console'
    )
  })

  test('a post without the CSRF token is refused and changes nothing', async ({ assert }) => {
    const admin = await createUser({ role: 'admin' })
    const target = await createUser({ credits: 0 })
    const visitor = await ConsoleVisitor.signedIn(admin)
    await visitor.get(`/console/accounts/${target.id}`)
    const forged = await visitor.post(
      `/console/accounts/${target.id}/grant`,
      { credits: '500', reason: 'forged' },
      { csrf: false }
    )
    assert.equal(forged.status, 403)
    const wrongToken = await visitor.request('POST', `/console/accounts/${target.id}/grant`, {
      credits: '500',
      reason: 'forged',
      _csrf: 'abc',
    })
    assert.equal(wrongToken.status, 403)
    const unchanged = await User.findOrFail(target.id)
    assert.equal(unchanged.aiCreditsBalance, 0)
  })

  test('support cannot grant credits, set roles, disable accounts or run agents, even with a valid form', async ({
    assert,
  }) => {
    const support = await createUser({ role: 'support' })
    const target = await createUser({ credits: 0 })
    const visitor = await ConsoleVisitor.signedIn(support)
    const page = await visitor.get(`/console/accounts/${target.id}`)
    assert.notInclude(page.html, 'id="grant-form"')
    for (const [path, form] of [
      [`/console/accounts/${target.id}/grant`, { credits: '500', reason: 'please' }],
      [`/console/accounts/${target.id}/role`, { role: 'admin' }],
      [`/console/accounts/${target.id}/disable`, {}],
    ] as const) {
      const answer = await visitor.post(path, form)
      assert.equal(answer.status, 403, path)
    }
    const fresh = await User.findOrFail(target.id)
    assert.equal(fresh.aiCreditsBalance, 0)
    assert.equal(fresh.role, 'user')
    assert.isNull(fresh.disabledAt)
    const audit = await db.from('audit_entries').where('target_id', target.id)
    assert.lengthOf(audit, 0)
  })

  test('an admin grant reaches the API balance and is audited', async ({ assert, client }) => {
    const admin = await createUser({ role: 'admin' })
    const target = await createUser({ credits: 0 })
    const visitor = await ConsoleVisitor.signedIn(admin)
    await visitor.get(`/console/accounts/${target.id}`)
    const grant = await visitor.post(`/console/accounts/${target.id}/grant`, {
      credits: '750',
      reason: 'goodwill after outage',
    })
    assert.equal(grant.status, 302)
    const balance = await client.get('/ai-credits/balance').bearerToken(jwtFor(target))
    assert.equal(balance.body().data.balance, 750)
    const entry = await db
      .from('audit_entries')
      .where('target_id', target.id)
      .where('action', 'account.grant_credits')
      .firstOrFail()
    assert.equal(entry.actor_email, admin.email)
    assert.deepEqual(entry.before, { aiCreditsBalance: 0 })
    assert.equal(entry.after.aiCreditsBalance, 750)
    const auditPage = await visitor.get('/console/audit?q=account.grant')
    assert.include(auditPage.html, 'goodwill after outage')
  })

  test('disabling an account stops its credentials at once', async ({ assert }) => {
    const admin = await createUser({ role: 'admin' })
    const target = await createUser()
    const jwt = jwtFor(target)
    assert.equal(await balanceStatus(jwt), 200)
    const visitor = await ConsoleVisitor.signedIn(admin)
    await visitor.get(`/console/accounts/${target.id}`)
    assert.equal(await statusOf(visitor.post(`/console/accounts/${target.id}/disable`)), 302)
    assert.equal(await balanceStatus(jwt), 401)
    await visitor.get(`/console/accounts/${target.id}`)
    await visitor.post(`/console/accounts/${target.id}/enable`)
    assert.equal(await balanceStatus(jwt), 200)
  })

  test('a live refresh during a form post leaves the notice and the session cookie to the post', async ({
    assert,
    client,
  }) => {
    const holder = await createUser()
    const ticket = await client
      .post('/support/tickets')
      .bearerToken(jwtFor(holder))
      .json({ subject: 'Refresh race', body: 'Agent is paused', category: 'technical' })
    ticket.assertStatus(201)
    const path = `/console/support/${ticket.body().data.id}`
    const operator = await ConsoleVisitor.signedIn(await createUser({ role: 'operator' }))
    await operator.get(path)
    const posted = await operator.post(`${path}/replies`, { body: 'We resumed your agent.' })
    assert.equal(posted.location, path)

    // The reply's live message makes the old page re-fetch itself before it follows the redirect.
    const cookiesAfterPost = new Map(operator.cookies)
    const refreshed = await operator.liveRefresh(path)
    assert.equal(refreshed.status, 200)
    assert.include(refreshed.html, 'We resumed your agent.')
    assert.deepEqual(operator.cookies, cookiesAfterPost, 'the refresh sets no cookie')

    const landed = await operator.get(path)
    assert.include(landed.html, 'Reply sent to the account holder')
  })

  test('unknown or malformed ids are 404 pages, never 500', async ({ assert }) => {
    const visitor = await ConsoleVisitor.signedIn(await createUser({ role: 'admin' }))
    for (const path of [
      '/console/accounts/nope',
      '/console/agents/00000000-0000-0000-0000-000000000000',
      '/console/support/%00x',
    ]) {
      const answer = await visitor.get(path)
      assert.oneOf(answer.status, [400, 404], path)
    }
    assert.equal(await statusOf(visitor.get('/console/accounts?page=-1')), 400)
  })
})

test.group('Console: pages', () => {
  test('the account page marks the current role and the current section only', async ({
    assert,
  }) => {
    const admin = await createUser({ role: 'admin' })
    const target = await createUser({ role: 'support' })
    const visitor = await ConsoleVisitor.signedIn(admin)
    const page = await visitor.get(`/console/accounts/${target.id}`)
    assert.match(page.html, /<option value="support" selected>/)
    assert.notMatch(page.html, /<option value="(user|operator|admin)" selected>/)
    assert.lengthOf([...page.html.matchAll(/aria-current=page/g)], 1)
    assert.notInclude(page.html, '@if(')
  })

  test('a list pages newest first: 25 rows and a next link, then the rest', async ({ assert }) => {
    const prefix = `pager${Date.now()}`
    const emails: string[] = []
    for (let i = 0; i < 26; i++) {
      emails.push(`${prefix}-${String(i).padStart(2, '0')}@example.test`)
      await createUser({ email: emails[i] })
    }
    // The oldest by a clear margin (two inserts may share a millisecond).
    await db
      .from('users')
      .where('email', emails[0])
      .update({ created_at: new Date(Date.now() - 86_400_000) })
    const visitor = await ConsoleVisitor.signedIn(await createUser({ role: 'support' }))
    const listed = (html: string) => emails.filter((email) => html.includes(email))
    const first = await visitor.get(`/console/accounts?q=${prefix}`)
    assert.lengthOf(listed(first.html), 25)
    assert.notInclude(listed(first.html), emails[0], 'the oldest is on the next page')
    assert.include(first.html, 'rel="next"')
    const second = await visitor.get(`/console/accounts?q=${prefix}&page=2`)
    assert.deepEqual(listed(second.html), [emails[0]])
    assert.notInclude(second.html, 'rel="next"')
    assert.include(second.html, 'rel="prev"')
  })
})

test.group('Console: agent lifecycle actions', (group) => {
  const owners = agentOwners()
  group.teardown(() => owners.removeAgents())

  test('an operator puts an agent to sleep: it stays active, its container stops, the audit says so; support may not; the page lists its schedules', async ({
    assert,
    client,
  }) => {
    const agent = await createFixtureAgent(client, await owners.create())
    await waitUntilServing(agent.id)

    const support = await ConsoleVisitor.signedIn(await createUser({ role: 'support' }))
    await support.get(`/console/agents/${agent.id}`)
    const refused = await support.post(`/console/agents/${agent.id}/sleep`)
    assert.equal(refused.status, 403)

    const operator = await ConsoleVisitor.signedIn(await createUser({ role: 'operator' }))
    const page = await operator.get(`/console/agents/${agent.id}`)
    assert.include(page.html, `/console/agents/${agent.id}/sleep`)
    const slept = await operator.post(`/console/agents/${agent.id}/sleep`)
    assert.equal(slept.status, 302)
    const service = await runtime()
    assert.isFalse(await service.isRunning(agent.id))
    const stored = await Agent.findOrFail(agent.id)
    assert.equal(stored.status, 'active')
    assert.isNotNull(stored.sleepingSince)
    await db.table('agent_schedules').insert({
      agent_id: agent.id,
      name: 'Nightly digest',
      cron: '0 2 * * *',
      timezone: 'UTC',
      message: 'digest',
    })
    await db.table('agent_channels').insert({
      agent_id: agent.id,
      channel: 'telegram',
      fingerprint: 'f'.repeat(64),
      state: 'error',
      identity: JSON.stringify({ username: 'digest_bot' }),
      last_error: 'Telegram refused the bot token',
    })
    const after = await operator.get(`/console/agents/${agent.id}`)
    assert.match(after.html, /<dt>Container<\/dt><dd id="agent-container">sleeping/)
    assert.include(after.html, 'Nightly digest', 'the schedules section lists its tasks')
    assert.include(after.html, 'digest_bot', 'the channels section lists its channels')
    assert.include(after.html, 'Telegram refused the bot token')
    const audit = await db
      .from('audit_entries')
      .where('target_id', agent.id)
      .where('action', 'agent.sleep')
    assert.lengthOf(audit, 1)
  }).timeout(60_000)
})
