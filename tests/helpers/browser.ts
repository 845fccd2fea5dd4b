/**
 * A real browser for console tests: Debian's Chromium driven by
 * playwright-core (no browser download). `.ci/run` installs the package.
 */
import { existsSync } from 'node:fs'
import { chromium, type Browser, type Page } from 'playwright-core'
import type User from '#identity/models/user'
import { baseUrl } from '#tests/helpers/http'
import { totpCode } from '#tests/helpers/console'
import { TEST_PASSWORD } from '#tests/helpers/identity'
import { lateBound } from '#tests/helpers/late_bound'

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

export function haveChromium(): boolean {
  return existsSync(CHROMIUM_PATH)
}

// A skip from a setup hook counts as a failure in japa: tests skip themselves with this reason.
export const NO_CHROMIUM = `Chromium is not installed (${CHROMIUM_PATH})`

/** A Chromium the group's tests share (when installed), closed after the group. */
export function browserForGroup(group: {
  setup(handler: () => Promise<void>): unknown
  teardown(handler: () => Promise<void>): unknown
}): Browser {
  let browser: Browser | undefined
  group.setup(async () => {
    if (haveChromium()) browser = await launchBrowser()
  })
  group.teardown(async () => {
    await browser?.close()
  })
  return lateBound(() => browser, NO_CHROMIUM)
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  })
}

/** Signs in through the real login form, setting up TOTP on first sign-in (operators, admins). */
export async function signIn(page: Page, user: User): Promise<string> {
  await page.goto(`${baseUrl()}/console/login`)
  await page.getByLabel('E-mail').fill(user.email)
  await page.getByLabel('Password').fill(TEST_PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL('**/console/totp/setup')
  const secret = await page.locator('#totp-secret').innerText()
  await page.getByLabel('Code from the app').fill(totpCode(user.email, secret))
  await page.getByRole('button', { name: 'Turn on two-factor sign-in' }).click()
  await page.locator('#recovery-codes').waitFor()
  return secret
}
