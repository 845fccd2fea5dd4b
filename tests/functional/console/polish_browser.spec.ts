import { test } from '@japa/runner'
import { randomBytes, randomUUID } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import type { Page } from 'playwright-core'
import { createUser, jwtFor, uniqueEmail, uniqueUsername } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import { linkIn, waitForMail } from '#tests/helpers/mail'
import { browserForGroup, haveChromium, NO_CHROMIUM, signIn } from '#tests/helpers/browser'
import {
  agentOwners,
  createFixtureAgent,
  runtime,
  waitUntilServing,
} from '#tests/helpers/agents_http'

const SCREEN = { width: 1280, height: 800 }

/** Every answer of 400 or more the page's loads got (documents, styles, scripts, icons). */
function failedLoads(page: Page): string[] {
  const failed: string[] = []
  page.on('response', (response) => {
    if (response.status() >= 400) failed.push(`${response.status()} ${response.url()}`)
  })
  return failed
}

test.group('Console polish in a real browser (Chromium, 1280 px)', (group) => {
  const browser = browserForGroup(group)
  const owners = agentOwners()
  group.teardown(() => owners.removeAgents())

  test('no page is wider than the screen, none loads a missing asset, the favicon is served', async ({
    assert,
    client,
  }) => {
    const admin = await createUser({ role: 'admin' })
    const owner = await owners.create()
    // Long unbroken text where the agent page showed it whole: config, names, ids.
    const agent = await createFixtureAgent(client, owner, {
      name: `Wide ${'W'.repeat(45)}`,
      config: { personality: `p${'x'.repeat(3000)}` },
    })
    // A feed event as a crash leaves it: one long unbroken line.
    await db.table('agent_feed_events').insert({
      id: randomUUID(),
      agent_id: agent.id,
      type: 'error',
      content: `spawn failed: /${'very-long-path-segment/'.repeat(60)}openclaw.mjs`,
      created_at: new Date(),
    })
    // A long unbroken value in the facts list (the account page's wallet).
    await db
      .from('users')
      .where('id', owner.id)
      .update({ wallet_address: randomBytes(32).toString('hex') })
    const ticket = await client
      .post('/support/tickets')
      .bearerToken(jwtFor(owner))
      .json({ subject: `S${'s'.repeat(150)}`, body: 'b'.repeat(4000), category: 'technical' })
    ticket.assertStatus(201)
    const page = await browser.newPage({ viewport: SCREEN })
    const failed = failedLoads(page)
    try {
      await signIn(page, admin)
      // An audit entry with a long reason.
      await page.goto(`${baseUrl()}/console/accounts/${owner.id}`)
      await page.getByLabel('Credits').fill('5')
      await page.locator('#reason').fill(`goodwill ${'r'.repeat(300)}`)
      await page.getByRole('button', { name: 'Grant' }).click()
      await page.getByText('Granted 5 AI Credits').waitFor()

      const paths = [
        '/',
        '/console',
        '/console/accounts',
        `/console/accounts/${owner.id}`,
        '/console/agents',
        `/console/agents/${agent.id}`,
        '/console/support',
        `/console/support/${ticket.body().data.id}`,
        '/console/payments',
        '/console/audit',
      ]
      for (const path of paths) {
        await page.goto(`${baseUrl()}${path}`, { waitUntil: 'networkidle' })
        const width = await page.locator('html').evaluate((root) => root.scrollWidth)
        assert.isAtMost(width, SCREEN.width, `${path} is ${width} px wide`)
        const icon = await page.locator('link[rel=icon]').getAttribute('href')
        assert.equal(icon, '/console/assets/favicon.svg', path)
      }
      assert.deepEqual(failed, [])

      for (const path of ['/favicon.ico', '/console/assets/favicon.svg']) {
        const answer = await fetch(`${baseUrl()}${path}`)
        assert.equal(answer.status, 200, path)
        assert.equal(answer.headers.get('content-type'), 'image/svg+xml', path)
        assert.include(await answer.text(), '<svg', path)
      }
    } finally {
      await page.close()
    }
  })
    .timeout(120_000)
    .skip(!haveChromium(), NO_CHROMIUM)

  test('Stop asks first: dismissed, nothing happens; confirmed, the agent stops and only Start is offered', async ({
    assert,
    client,
  }) => {
    const operator = await createUser({ role: 'operator' })
    const owner = await owners.create()
    const agent = await createFixtureAgent(client, owner, { name: 'Confirm me' })
    await waitUntilServing(agent.id)
    const service = await runtime()
    const page = await browser.newPage({ viewport: SCREEN })
    try {
      await signIn(page, operator)
      await page.goto(`${baseUrl()}/console/agents/${agent.id}`)
      await page.locator('#agent-container', { hasText: 'running' }).waitFor()
      const actions = page.locator('section.actions button')
      assert.deepEqual(await actions.allInnerTexts(), ['Stop', 'Restart', 'Sleep'])

      const asked: string[] = []
      page.once('dialog', (dialog) => {
        asked.push(dialog.message())
        void dialog.dismiss()
      })
      await page.getByRole('button', { name: 'Stop' }).click()
      assert.lengthOf(asked, 1)
      assert.include(asked[0], 'Stop Confirm me?')
      assert.equal(await service.containerView(agent.id), 'running')

      page.once('dialog', (dialog) => {
        asked.push(dialog.message())
        void dialog.accept()
      })
      await page.getByRole('button', { name: 'Stop' }).click()
      await page.locator('p.notice', { hasText: 'Agent stopped' }).waitFor()
      assert.lengthOf(asked, 2)
      assert.equal(await service.containerView(agent.id), 'stopped')
      assert.deepEqual(await actions.allInnerTexts(), ['Start'])
    } finally {
      await page.close()
    }
  })
    .timeout(60_000)
    .skip(!haveChromium(), NO_CHROMIUM)

  test("times show in the reader's zone with a relative time, the same on every page", async ({
    assert,
  }) => {
    const admin = await createUser({ role: 'admin' })
    const target = await createUser()
    const context = await browser.newContext({
      viewport: SCREEN,
      timezoneId: 'Asia/Tokyo',
      locale: 'en-US',
    })
    const page = await context.newPage()
    try {
      await signIn(page, admin)
      await page.goto(`${baseUrl()}/console/accounts/${target.id}`)
      await page.getByLabel('Credits').fill('7')
      await page.locator('#reason').fill('relative time check')
      await page.getByRole('button', { name: 'Grant' }).click()
      await page.getByText('Granted 7 AI Credits').waitFor()

      for (const path of [`/console/accounts/${target.id}`, '/console/audit']) {
        await page.goto(`${baseUrl()}${path}`)
        const time = page.locator('time[data-relative]').first()
        const iso = (await time.getAttribute('datetime'))!
        assert.match(iso, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, path)
        const shown = await time.innerText()
        assert.match(shown, /\((just now|\d+ (sec|min)\.? ago)\)$/, `${path}: ${shown}`)
        // In the reader's zone (Tokyo, UTC+9), not in UTC.
        const inTokyo = new Intl.DateTimeFormat('en-US', {
          dateStyle: 'medium',
          timeStyle: 'short',
          timeZone: 'Asia/Tokyo',
        }).format(new Date(iso))
        assert.equal(shown.replace(/ \(.*\)$/, ''), inTokyo, path)
        assert.notInclude(shown, 'UTC', path)
      }
      // The audit entry reads as a change, not as JSON.
      const change = page.locator('ul.changes li', { hasText: 'aiCreditsBalance' }).first()
      assert.match(await change.innerText(), /aiCreditsBalance: \d+ → \d+/)
      assert.equal(await page.locator('td code', { hasText: '{"' }).count(), 0)
    } finally {
      await context.close()
    }
  })
    .timeout(60_000)
    .skip(!haveChromium(), NO_CHROMIUM)
})

test.group('No dead ends for a browser (Chromium)', (group) => {
  const browser = browserForGroup(group)

  test('GET / is a page with links onwards; the verification link is a page in both outcomes', async ({
    assert,
    client,
  }) => {
    const page = await browser.newPage({ viewport: SCREEN })
    try {
      const landing = await page.goto(`${baseUrl()}/`)
      assert.match(landing!.headers()['content-type'], /text\/html/)
      for (const [name, href] of [
        ['API documentation', '/docs'],
        ['Staff console', '/console'],
        ['Health', '/health'],
      ]) {
        assert.equal(await page.getByRole('link', { name }).getAttribute('href'), href)
      }

      const email = uniqueEmail('browser-verify')
      const registered = await client
        .post('/auth/register')
        .json({ email, username: uniqueUsername('bv'), password: 'correct-horse-battery' })
      registered.assertStatus(200)
      const link = linkIn(await waitForMail(email, { subject: /verify/i }), '/auth/verify-email/')
      const verified = await page.goto(`${baseUrl()}${link.pathname}`)
      assert.equal(verified!.status(), 200)
      assert.equal(await page.getByRole('heading').innerText(), 'E-mail verified')
      assert.include(await page.getByRole('status').innerText(), 'You can sign in now')
      await page.getByRole('link', { name: 'Continue to Agent Host' }).click()
      await page.getByRole('link', { name: 'API documentation' }).waitFor()

      const unknown = await page.goto(`${baseUrl()}/auth/verify-email/${'A'.repeat(43)}`)
      assert.equal(unknown!.status(), 400)
      assert.equal(await page.getByRole('heading').innerText(), 'This link did not work')
      assert.include(await page.locator('main').innerText(), 'resend-verification')
    } finally {
      await page.close()
    }
  })
    .timeout(60_000)
    .skip(!haveChromium(), NO_CHROMIUM)
})
