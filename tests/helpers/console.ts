/**
 * A console visitor over real HTTP with a cookie jar: reads the CSRF field
 * of each page it loads and posts forms with it, like a browser would.
 *
 *   const visitor = await ConsoleVisitor.signedIn(staffUser)   // TOTP set up when needed
 *   const page = await visitor.get('/console/accounts')
 *   await visitor.post(`/console/accounts/${id}/grant`, { credits: '50', reason: 'goodwill' })
 */
import { TOTP, Secret } from 'otpauth'
import type User from '#identity/models/user'
import { baseUrl } from '#tests/helpers/http'
import { TEST_PASSWORD } from '#tests/helpers/identity'

export interface PageAnswer {
  status: number
  location: string | null
  html: string
}

export function totpCode(email: string, secret: string, offsetSeconds = 0): string {
  return new TOTP({ issuer: 'x', label: email, secret: Secret.fromBase32(secret) }).generate({
    timestamp: Date.now() + offsetSeconds * 1000,
  })
}

export class ConsoleVisitor {
  /** `base`: another server than the test run's own (e.g. the built one). */
  constructor(readonly base = baseUrl()) {}

  readonly cookies = new Map<string, string>()
  csrf: string | null = null
  /** Base32 TOTP secret once this visitor set one up. */
  totpSecret: string | null = null

  #cookieHeader() {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ')
  }

  #remember(response: Response) {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';')
      const index = pair.indexOf('=')
      const name = pair.slice(0, index)
      const value = pair.slice(index + 1)
      if (/expires=Thu, 01 Jan 1970/i.test(line) || value === '') this.cookies.delete(name)
      else this.cookies.set(name, value)
    }
  }

  async request(
    method: string,
    path: string,
    form?: Record<string, string>,
    headers: Record<string, string> = {}
  ): Promise<PageAnswer> {
    const response = await fetch(`${this.base}${path}`, {
      method,
      redirect: 'manual',
      headers: {
        cookie: this.#cookieHeader(),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        ...headers,
      },
      body: form ? new URLSearchParams(form).toString() : undefined,
    })
    this.#remember(response)
    const html = await response.text()
    const token = /name=['"]_csrf['"] value=['"]([^'"]+)['"]/.exec(html)
    if (token) this.csrf = token[1]
    return { status: response.status, location: response.headers.get('location'), html }
  }

  get(path: string) {
    return this.request('GET', path)
  }

  /** The re-fetch console.js makes when a live message arrives. */
  liveRefresh(path: string) {
    return this.request('GET', path, undefined, { 'x-console-refresh': '1' })
  }

  /** Posts a form with the CSRF token of the last page loaded (unless `csrf: false`). */
  post(path: string, fields: Record<string, string> = {}, options: { csrf?: boolean } = {}) {
    const form = { ...fields }
    if (options.csrf !== false && this.csrf) form._csrf = this.csrf
    return this.request('POST', path, form)
  }

  /** Signs in through the login form, setting up or answering TOTP as the account needs. */
  async signIn(
    user: Pick<User, 'email'>,
    password = TEST_PASSWORD,
    totpSecret?: string
  ): Promise<PageAnswer> {
    await this.get('/console/login')
    let answer = await this.post('/console/login', { email: user.email, password })
    if (answer.location === '/console/totp/setup') {
      const setup = await this.get('/console/totp/setup')
      this.totpSecret = /id="totp-secret">([A-Z2-7]+)</.exec(setup.html)![1]
      answer = await this.post('/console/totp/setup', {
        code: totpCode(user.email, this.totpSecret),
      })
    } else if (answer.location === '/console/login/totp') {
      await this.get('/console/login/totp')
      answer = await this.post('/console/login/totp', { code: totpCode(user.email, totpSecret!) })
    }
    return answer
  }

  static async signedIn(user: User): Promise<ConsoleVisitor> {
    const visitor = new ConsoleVisitor()
    await visitor.signIn(user)
    return visitor
  }
}

/** The status of a page answer (keeps assertions on one line). */
export async function statusOf(answer: Promise<PageAnswer>): Promise<number> {
  const { status } = await answer
  return status
}

/** Where a page answer redirects to, if anywhere. */
export async function locationOf(answer: Promise<PageAnswer>): Promise<string | null> {
  const { location } = await answer
  return location
}
