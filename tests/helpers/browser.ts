/**
 * A real browser for console tests: Debian's Chromium driven by
 * playwright-core (no browser download). `.ci/run` installs the package.
 */
import { existsSync } from 'node:fs'
import { chromium, type Browser } from 'playwright-core'

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

export function haveChromium(): boolean {
  return existsSync(CHROMIUM_PATH)
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  })
}
