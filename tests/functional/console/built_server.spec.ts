import { test } from '@japa/runner'
import type { Browser, Response } from 'playwright-core'
import { haveChromium, launchBrowser, NO_CHROMIUM } from '#tests/helpers/browser'
import { npmStart, type NpmStarted } from '#tests/helpers/built_server'
import { totpCode } from '#tests/helpers/console'
import { TEST_PASSWORD } from '#tests/helpers/identity'
import { signUpAccountAt } from '#tests/helpers/service_under_fault'

/**
 * The console as shipped: `npm start` (the built server under build/, its
 * own storage and embedded PostgreSQL), a staff role given with
 * `npm run ace -- user:role`, and Chromium loading every page's assets.
 */
test.group('Console on the built server (npm start, Chromium)', (group) => {
  let browser: Browser | undefined
  let service: NpmStarted | undefined
  group.teardown(async () => {
    await browser?.close()
    await service?.destroy()
  })

  test('every asset loads, styles apply, live updates arrive over Transmit, a reply is sent', async ({
    assert,
  }) => {
    service = await npmStart()
    browser = await launchBrowser()
    const { url } = service

    const operator = await signUpAccountAt(url, service.storage)
    const role = await service.ace('user:role', operator.email, 'operator')
    assert.equal(role.code, 0, role.output)
    const holder = await signUpAccountAt(url, service.storage)

    const page = await browser.newPage()
    // Every answer the page gets: a document may redirect (3xx), nothing may fail.
    const failures: string[] = []
    const assets = new Set<string>()
    page.on('response', (response: Response) => {
      const status = response.status()
      const kind = response.request().resourceType()
      if (kind !== 'document') assets.add(`${kind} ${new URL(response.url()).pathname}`)
      const allowed = status < 300 || (kind === 'document' && status < 400)
      if (!allowed) failures.push(`${status} ${kind} ${response.url()}`)
    })
    page.on('requestfailed', (request) => {
      // ERR_ABORTED is the browser's own doing (a navigation cuts the live stream of the page it leaves).
      const reason = request.failure()?.errorText ?? ''
      if (!reason.includes('ERR_ABORTED')) failures.push(`failed ${request.url()}: ${reason}`)
    })
    page.on('pageerror', (error) => failures.push(`page error: ${error.message}`))

    try {
      await page.goto(`${url}/console/login`)
      await page.getByLabel('E-mail').fill(operator.email)
      await page.getByLabel('Password').fill(TEST_PASSWORD)
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.waitForURL('**/console/totp/setup')
      const secret = await page.locator('#totp-secret').innerText()
      await page.getByLabel('Code from the app').fill(totpCode(operator.email, secret))
      await page.getByRole('button', { name: 'Turn on two-factor sign-in' }).click()
      await page.locator('#recovery-codes').waitFor()

      await page.goto(`${url}/console/support?status=open`)
      // Pico's classless sheet sets the body's font to its system stack (the
      // browser's default is a serif); both sheets are the page's.
      // (Expressions as strings: the project's TypeScript has no DOM types.)
      const font = await page.evaluate<string>('getComputedStyle(document.body).fontFamily')
      assert.include(font, 'system-ui', `Pico's stylesheet did not apply (font: ${font})`)
      const sheets = await page.evaluate<string[]>(
        '[...document.styleSheets].map((sheet) => new URL(sheet.href ?? "", location.href).pathname)'
      )
      assert.includeMembers(sheets, ['/console/assets/pico.css', '/console/assets/console.css'])

      // console.js subscribed over Transmit (it marks the element once the server confirmed).
      await page.locator('[data-live-ready="true"]').first().waitFor({ timeout: 15_000 })

      const subject = `Built server ticket ${Date.now()}`
      const created = await fetch(`${url}/support/tickets`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'authorization': `Bearer ${holder.token}` },
        body: JSON.stringify({ subject, body: 'My agent is paused', category: 'technical' }),
      })
      assert.equal(created.status, 201)
      const ticketId = ((await created.json()) as { data: { id: string } }).data.id
      // Arrives over Transmit: no navigation happened.
      const link = page.getByRole('link', { name: subject })
      await link.waitFor({ timeout: 15_000 })
      await link.click()
      await page.getByLabel('Reply').fill('We resumed your agent.')
      await page.getByRole('button', { name: 'Send' }).click()
      await page.getByText('Reply sent to the account holder').waitFor()

      const seen = await fetch(`${url}/support/tickets/${ticketId}`, {
        headers: { authorization: `Bearer ${holder.token}` },
      })
      const ticket = ((await seen.json()) as { data: any }).data
      assert.equal(ticket.status, 'waiting')
      assert.deepEqual(
        ticket.replies.map((reply: any) => [reply.author, reply.body]),
        [['staff', 'We resumed your agent.']]
      )

      for (const asset of ['pico.css', 'console.css', 'console.js', 'transmit.js']) {
        assert.isTrue(
          [...assets].some((seenAsset) => seenAsset.endsWith(`/console/assets/${asset}`)),
          `${asset} was loaded (seen: ${[...assets].join(', ')})`
        )
      }
      assert.deepEqual(failures, [], 'every answer the pages got was a success')
    } finally {
      await page.close()
    }
  })
    .timeout(300_000)
    .skip(!haveChromium(), NO_CHROMIUM)
})
