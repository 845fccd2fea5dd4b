import { test } from '@japa/runner'
import { appUrl } from '#config/app'
import { createUser, TEST_PASSWORD } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'

const EVIL = 'https://evil.example'
const OWN = new URL(appUrl).origin

async function loginCookie(email: string): Promise<string> {
  const response = await fetch(`${baseUrl()}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'origin': OWN },
    body: JSON.stringify({ email, password: TEST_PASSWORD }),
  })
  const cookie = response.headers.getSetCookie().find((c) => c.startsWith('platform_refresh='))
  return cookie!.split(';')[0]
}

function refreshFrom(origin: string, cookie: string) {
  return fetch(`${baseUrl()}/auth/refresh`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin, cookie },
  })
}

test.group('CORS: only allowed origins, never reflected with credentials', () => {
  test('another origin gets no CORS headers and cannot use the refresh cookie', async ({
    assert,
  }) => {
    const user = await createUser()
    const cookie = await loginCookie(user.email)

    const preflight = await fetch(`${baseUrl()}/auth/refresh`, {
      method: 'OPTIONS',
      headers: { 'origin': EVIL, 'access-control-request-method': 'POST' },
    })
    assert.isNull(preflight.headers.get('access-control-allow-origin'))

    const stolen = await refreshFrom(EVIL, cookie)
    assert.equal(stolen.status, 403)
    const body = (await stolen.json()) as any
    assert.equal(body.code, 'FORBIDDEN')
    assert.notProperty(body, 'data', 'no token reaches the other origin')
    assert.isNull(stolen.headers.get('access-control-allow-origin'))
  })

  test("APP_URL's origin is allowed with credentials and can refresh with the cookie", async ({
    assert,
  }) => {
    const user = await createUser()
    const cookie = await loginCookie(user.email)
    const answer = await refreshFrom(OWN, cookie)
    assert.equal(answer.status, 200)
    assert.equal(answer.headers.get('access-control-allow-origin'), OWN)
    assert.equal(answer.headers.get('access-control-allow-credentials'), 'true')
  })
})
