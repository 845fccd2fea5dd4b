import { test } from '@japa/runner'
import { createUser, jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import { waitForMail } from '#tests/helpers/mail'
import { browserForGroup, haveChromium, NO_CHROMIUM, signIn } from '#tests/helpers/browser'
import {
  agentOwners,
  callFixture,
  createFixtureAgent,
  waitUntilServing,
} from '#tests/helpers/agents_http'

test.group('Console in a real browser (Chromium)', (group) => {
  const browser = browserForGroup(group)
  const owners = agentOwners()
  group.teardown(() => owners.removeAgents())

  test('an operator signs in with TOTP; a new ticket appears live; a reply reaches the holder', async ({
    assert,
    client,
  }) => {
    const operator = await createUser({ role: 'operator' })
    const holder = await createUser()
    const page = await browser.newPage()
    try {
      await signIn(page, operator)
      await page.goto(`${baseUrl()}/console/support?status=open`)
      await page.locator('[data-live-ready="true"]').waitFor()

      const created = await client
        .post('/support/tickets')
        .bearerToken(jwtFor(holder))
        .json({
          subject: `Live ticket ${holder.username}`,
          body: 'Agent is paused',
          category: 'technical',
        })
      created.assertStatus(201)
      // Arrives over Transmit: no navigation happened.
      const link = page.getByRole('link', { name: `Live ticket ${holder.username}` })
      await link.waitFor({ timeout: 10_000 })
      await link.click()
      await page.getByLabel('Reply').fill('We resumed your agent.')
      await page.getByRole('button', { name: 'Send' }).click()
      await page.getByText('Reply sent to the account holder').waitFor()

      const seen = await client
        .get(`/support/tickets/${created.body().data.id}`)
        .bearerToken(jwtFor(holder))
      assert.equal(seen.body().data.status, 'waiting')
      assert.deepEqual(
        seen.body().data.replies.map((r: any) => [r.author, r.body]),
        [['staff', 'We resumed your agent.']]
      )
      const mail = await waitForMail(holder.email, { subject: /^Re: Live ticket/ })
      assert.include(mail.text ?? '', 'We resumed your agent.')
    } finally {
      await page.close()
    }
  })
    .timeout(60_000)
    .skip(!haveChromium(), NO_CHROMIUM)

  test('a live log line and live monitoring figures appear on the agent page without a reload', async ({
    assert,
    client,
  }) => {
    const support = await createUser({ role: 'admin' })
    const owner = await owners.create()
    const agent = await createFixtureAgent(client, owner)
    await waitUntilServing(agent.id)
    const page = await browser.newPage()
    try {
      await signIn(page, support)
      await page.goto(`${baseUrl()}/console/agents/${agent.id}`)
      await page.locator('#live-log[data-live-ready="true"]').waitFor()
      const marker = `console-live-${Date.now()}`
      await callFixture(agent.id, `/log?text=${marker}`)
      await page.locator('#live-log', { hasText: marker }).waitFor({ timeout: 10_000 })

      // Blank the rendered figures: only a live message can fill them in again.
      await page.locator('#agent-monitoring[data-live-ready="true"]').waitFor()
      await page.locator('#agent-monitoring [data-figure]').evaluateAll((cells) => {
        for (const cell of cells) cell.textContent = ''
      })
      const memory = page.locator('#agent-monitoring [data-figure="memoryMb"]')
      await page
        .locator('#agent-monitoring [data-figure="status"]', { hasText: 'running' })
        .waitFor({ timeout: 15_000 })
      assert.isAbove(Number(await memory.textContent()), 0)
    } finally {
      await page.close()
    }
  })
    .timeout(60_000)
    .skip(!haveChromium(), NO_CHROMIUM)

  test('a support user sees no grant form and a forged grant post is refused', async ({
    assert,
  }) => {
    const support = await createUser({ role: 'support' })
    const target = await createUser({ credits: 0 })
    const page = await browser.newPage()
    try {
      await page.goto(`${baseUrl()}/console/login`)
      await page.getByLabel('E-mail').fill(support.email)
      await page.getByLabel('Password').fill('correct-horse-battery')
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.waitForURL(`${baseUrl()}/console`)
      await page.goto(`${baseUrl()}/console/accounts/${target.id}`)
      assert.equal(await page.locator('#grant-form').count(), 0)
      // A forged form, with the page's own valid CSRF token.
      const token = await page.locator('input[name=_csrf]').first().inputValue()
      const status = await page.evaluate(
        async ({ id, csrf }) => {
          const answer = await fetch(`/console/accounts/${id}/grant`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({ _csrf: csrf, credits: '999', reason: 'forged' }),
          })
          return answer.status
        },
        { id: target.id, csrf: token }
      )
      assert.equal(status, 403)
      await target.refresh()
      assert.equal(target.aiCreditsBalance, 0)
    } finally {
      await page.close()
    }
  })
    .timeout(60_000)
    .skip(!haveChromium(), NO_CHROMIUM)
})
