import { test } from '@japa/runner'
import { createHmac, hkdfSync, randomUUID } from 'node:crypto'
import db from '@adonisjs/lucid/services/db'
import { DateTime } from 'luxon'
import User from '#identity/models/user'
import { identityLimits } from '#config/identity'
import { createUser, jwtFor, TEST_PASSWORD, uniqueEmail } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'

/** A dashboard route that needs a JWT and has no side effect. */
const DASHBOARD_ROUTE = '/auth/api-keys'

/**
 * Builds an HS256 JWT independently of the service's code: key derived
 * from APP_KEY the documented way (HKDF-SHA256, salt "agent-host", info
 * "jwt-hs256"), or from any other secret to forge a wrongly signed one.
 */
function craftJwt(
  claims: Record<string, unknown>,
  options: { secret?: string; header?: Record<string, unknown>; signature?: string } = {}
) {
  const secret = options.secret ?? process.env.APP_KEY!
  const key = Buffer.from(hkdfSync('sha256', secret, 'agent-host', 'jwt-hs256', 32))
  const header = Buffer.from(JSON.stringify(options.header ?? { alg: 'HS256', typ: 'JWT' }))
  const body = `${header.toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`
  const signature = options.signature ?? createHmac('sha256', key).update(body).digest('base64url')
  return `${body}.${signature}`
}

function claimsFor(userId: string, overrides: Record<string, unknown> = {}) {
  const now = Math.floor(Date.now() / 1000)
  return {
    sub: userId,
    aud: 'dashboard',
    iat: now,
    exp: now + 3600,
    jti: randomUUID(),
    ...overrides,
  }
}

async function login(email: string, password = TEST_PASSWORD) {
  const response = await fetch(`${baseUrl()}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  })
  return {
    status: response.status,
    body: (await response.json()) as any,
    headers: response.headers,
  }
}

async function refreshWith(options: { body?: unknown; cookie?: string }) {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (options.cookie) headers.cookie = `platform_refresh=${options.cookie}`
  const response = await fetch(`${baseUrl()}/auth/refresh`, {
    method: 'POST',
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  })
  return {
    status: response.status,
    body: (await response.json()) as any,
    headers: response.headers,
  }
}

async function statusOf(pending: Promise<{ status: number }>) {
  const response = await pending
  return response.status
}

async function sessionData(email: string) {
  const response = await login(email)
  return response.body.data
}

async function refreshData(refreshToken: string) {
  const response = await refreshWith({ body: { refreshToken } })
  return response.body.data
}

function refreshCookieOf(headers: Headers): string | undefined {
  return headers.getSetCookie().find((c) => c.startsWith('platform_refresh='))
}

test.group('Sign-in', () => {
  test('login answers the session and sets the refresh cookie', async ({ client, assert }) => {
    const user = await createUser({ tier: 'starter' })
    const response = await login(user.email.toUpperCase())
    assert.equal(response.status, 200)
    const data = response.body.data
    assert.deepEqual(Object.keys(data).sort(), ['expiresIn', 'refreshToken', 'token', 'user'])
    assert.equal(data.expiresIn, '7d')
    assert.match(data.refreshToken, /^hrt_[\w-]{40,}$/)
    assert.deepEqual(data.user, {
      id: user.id,
      email: user.email,
      username: user.username,
      tier: 'starter',
    })

    // The JWT lasts 7 days and names the user.
    const claims = JSON.parse(Buffer.from(data.token.split('.')[1], 'base64url').toString())
    assert.equal(claims.sub, user.id)
    assert.equal(claims.exp - claims.iat, 7 * 24 * 3600)

    const cookie = refreshCookieOf(response.headers)!
    assert.isDefined(cookie)
    assert.include(cookie, `platform_refresh=${data.refreshToken}`)
    assert.match(cookie, /HttpOnly/i)
    assert.match(cookie, /SameSite=Lax/i)
    assert.match(cookie, /Path=\/auth/i)
    assert.notMatch(cookie, /Secure/i) // APP_URL is http in tests

    const dashboard = await client.get(DASHBOARD_ROUTE).bearerToken(data.token)
    dashboard.assertStatus(200)
  })

  test('unknown e-mail and wrong password get one and the same answer', async ({ assert }) => {
    const user = await createUser()
    const unknown = await login(uniqueEmail('ghost'))
    const wrong = await login(user.email, 'not-the-password')
    assert.equal(unknown.status, 401)
    assert.equal(wrong.status, 401)
    assert.deepEqual(unknown.body, wrong.body)
    assert.equal(wrong.body.code, 'AUTH_REQUIRED')
  })

  test('a 254-character e-mail is an ordinary unknown address, not a 500', async ({ assert }) => {
    // The rate-limit keys held the address and passed the limiter's 255 characters (fuzz finding).
    const longest = `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(56)}.test`
    assert.lengthOf(longest, 254)
    const signIn = await login(longest)
    assert.equal(signIn.status, 401)
    assert.equal(signIn.body.code, 'AUTH_REQUIRED')
    const resend = await fetch(`${baseUrl()}/auth/resend-verification`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: longest }),
    })
    assert.equal(resend.status, 200)
  })

  test('an unverified account is refused with EMAIL_NOT_VERIFIED', async ({ assert }) => {
    const user = await createUser({ verified: false })
    const response = await login(user.email)
    assert.equal(response.status, 403)
    assert.equal(response.body.code, 'EMAIL_NOT_VERIFIED')
    // A wrong password does not reveal the account's state.
    const wrong = await login(user.email, 'not-the-password')
    assert.equal(wrong.status, 401)
  })

  test('10 failures per e-mail and client within 15 minutes give 429', async ({ assert }) => {
    const user = await createUser()
    for (let i = 0; i < 10; i++) {
      const failed = await login(user.email, `wrong-${i}`)
      assert.equal(failed.status, 401)
    }
    const blocked = await login(user.email)
    assert.equal(blocked.status, 429)
    assert.equal(blocked.body.code, 'RATE_LIMIT_EXCEEDED')

    // Another address from the same client is not affected.
    const other = await createUser()
    assert.equal(await statusOf(login(other.email)), 200)
  })

  test('a success resets the failure count', async ({ assert }) => {
    const user = await createUser()
    for (let i = 0; i < 9; i++) await login(user.email, `wrong-${i}`)
    assert.equal(await statusOf(login(user.email)), 200)
    for (let i = 0; i < 9; i++) await login(user.email, `wrong-${i}`)
    assert.equal(await statusOf(login(user.email)), 200)
  })

  test('a disabled account cannot sign in and its JWT stops working', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const token = jwtFor(user)
    user.disabledAt = DateTime.now()
    await user.save()
    assert.equal(await statusOf(login(user.email)), 403)
    const response = await client.get(DASHBOARD_ROUTE).bearerToken(token)
    response.assertStatus(401)
  })
})

test.group('JWT checks', () => {
  test('{name} is refused with 401 AUTH_REQUIRED')
    .with([
      {
        name: 'an expired JWT',
        make: (id: string) =>
          craftJwt(
            claimsFor(id, {
              iat: Math.floor(Date.now() / 1000) - 8 * 86400,
              exp: Math.floor(Date.now() / 1000) - 60,
            })
          ),
      },
      {
        name: 'a JWT signed with another key',
        make: (id: string) => craftJwt(claimsFor(id), { secret: 'some-other-application-key' }),
      },
      {
        name: 'a JWT with alg none',
        make: (id: string) =>
          craftJwt(claimsFor(id), { header: { alg: 'none', typ: 'JWT' }, signature: '' }),
      },
      {
        name: 'a JWT for another audience',
        make: (id: string) => craftJwt(claimsFor(id, { aud: 'api' })),
      },
      { name: 'a malformed token', make: () => 'not.a.jwt' },
      { name: 'garbage', make: () => 'garbage' },
    ])
    .run(async ({ client, assert }, row) => {
      const user = await createUser()
      // The same construction with the right key and claims is accepted...
      const good = await client.get(DASHBOARD_ROUTE).bearerToken(craftJwt(claimsFor(user.id)))
      good.assertStatus(200)
      // ...and this variant is not.
      const response = await client.get(DASHBOARD_ROUTE).bearerToken(row.make(user.id))
      response.assertStatus(401)
      assert.equal(response.body().code, 'AUTH_REQUIRED')
      assert.equal(response.body().success, false)
    })

  test('a tampered JWT (payload changed, signature kept) is refused', async ({
    client,
    assert,
  }) => {
    const victim = await createUser()
    const attacker = await createUser()
    const [header, , signature] = jwtFor(attacker).split('.')
    const forgedPayload = Buffer.from(JSON.stringify(claimsFor(victim.id))).toString('base64url')
    const response = await client
      .get(DASHBOARD_ROUTE)
      .bearerToken(`${header}.${forgedPayload}.${signature}`)
    response.assertStatus(401)
    assert.equal(response.body().code, 'AUTH_REQUIRED')
  })

  test('a JWT of a deleted user is refused', async ({ client }) => {
    const user = await createUser()
    const token = jwtFor(user)
    await User.query().where('id', user.id).delete()
    const response = await client.get(DASHBOARD_ROUTE).bearerToken(token)
    response.assertStatus(401)
  })

  test('no credential, or a non-bearer scheme, is 401', async ({ client, assert }) => {
    const none = await client.get(DASHBOARD_ROUTE)
    none.assertStatus(401)
    assert.equal(none.body().code, 'AUTH_REQUIRED')
    const basic = await client.get(DASHBOARD_ROUTE).header('authorization', 'Basic YTpi')
    basic.assertStatus(401)
  })
})

test.group('Refresh tokens', () => {
  test('refresh rotates: new JWT and refresh token, the old one is spent', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const first = await sessionData(user.email)

    const rotated = await refreshWith({ body: { refreshToken: first.refreshToken } })
    assert.equal(rotated.status, 200)
    assert.deepEqual(Object.keys(rotated.body.data).sort(), ['expiresIn', 'refreshToken', 'token'])
    assert.equal(rotated.body.data.expiresIn, '7d')
    assert.notEqual(rotated.body.data.refreshToken, first.refreshToken)
    assert.include(refreshCookieOf(rotated.headers)!, rotated.body.data.refreshToken)
    const dashboard = await client.get(DASHBOARD_ROUTE).bearerToken(rotated.body.data.token)
    dashboard.assertStatus(200)

    const next = await refreshWith({ body: { refreshToken: rotated.body.data.refreshToken } })
    assert.equal(next.status, 200)
  })

  test('reusing a rotated token revokes the whole family', async ({ assert }) => {
    const user = await createUser()
    const first = await sessionData(user.email)
    const second = await refreshData(first.refreshToken)

    const reuse = await refreshWith({ body: { refreshToken: first.refreshToken } })
    assert.equal(reuse.status, 401)
    assert.equal(reuse.body.code, 'AUTH_REQUIRED')

    // The legitimate newest token is dead too: everyone must sign in again.
    const after = await refreshWith({ body: { refreshToken: second.refreshToken } })
    assert.equal(after.status, 401)

    // Another sign-in (another family) is not affected.
    const otherSession = await sessionData(user.email)
    const unaffected = await refreshWith({ body: { refreshToken: otherSession.refreshToken } })
    assert.equal(unaffected.status, 200)
  })

  test('two concurrent uses of one token: at most one wins', async ({ assert }) => {
    const user = await createUser()
    const session = await sessionData(user.email)
    const results = await Promise.all(
      Array.from({ length: 5 }, () => refreshWith({ body: { refreshToken: session.refreshToken } }))
    )
    const ok = results.filter((r) => r.status === 200)
    assert.isAtMost(ok.length, 1)
    assert.isTrue(results.every((r) => r.status === 200 || r.status === 401))
  })

  test('a browser refreshes with the cookie alone', async ({ assert }) => {
    const user = await createUser()
    const session = await login(user.email)
    const cookie = refreshCookieOf(session.headers)!
    const cookieValue = cookie.split(';')[0].split('=').slice(1).join('=')

    const rotated = await refreshWith({ cookie: cookieValue })
    assert.equal(rotated.status, 200)
    assert.isString(rotated.body.data.token)
    const newCookie = refreshCookieOf(rotated.headers)!
    assert.include(newCookie, rotated.body.data.refreshToken)

    const empty = await refreshWith({})
    assert.equal(empty.status, 401)
  })

  test('unknown, malformed and expired refresh tokens are refused', async ({ assert }) => {
    assert.equal(await statusOf(refreshWith({ body: { refreshToken: 'hrt_nope' } })), 401)
    assert.equal(await statusOf(refreshWith({ body: { refreshToken: 'x'.repeat(600) } })), 400)
    assert.equal(await statusOf(refreshWith({ body: { refreshToken: 42 } })), 400)

    const user = await createUser()
    const session = await sessionData(user.email)
    await db
      .from('refresh_tokens')
      .where('user_id', user.id)
      .update({ expires_at: new Date(Date.now() - 1000) })
    assert.equal(await statusOf(refreshWith({ body: { refreshToken: session.refreshToken } })), 401)
  })

  test('refresh tokens are stored hashed and last 30 days', async ({ assert }) => {
    const user = await createUser()
    const session = await sessionData(user.email)
    const rows = await db.from('refresh_tokens').where('user_id', user.id)
    assert.lengthOf(rows, 1)
    assert.notEqual(rows[0].token_hash, session.refreshToken)
    assert.notInclude(JSON.stringify(rows), session.refreshToken)
    const days = (new Date(rows[0].expires_at).getTime() - Date.now()) / 86_400_000
    assert.closeTo(days, 30, 0.01)
  })

  test('logout revokes the family and clears the cookie', async ({ assert }) => {
    const user = await createUser()
    const session = await login(user.email)
    const token = session.body.data.refreshToken
    const second = await refreshData(token)

    const response = await fetch(`${baseUrl()}/auth/logout`, {
      method: 'POST',
      headers: { cookie: `platform_refresh=${second.refreshToken}` },
    })
    assert.equal(response.status, 200)
    const body = (await response.json()) as any
    assert.isTrue(body.data.loggedOut)
    const cleared = refreshCookieOf(response.headers)!
    assert.match(cleared, /platform_refresh=;|Max-Age=0|Expires=Thu, 01 Jan 1970/i)

    assert.equal(await statusOf(refreshWith({ body: { refreshToken: second.refreshToken } })), 401)
  })
})

test.group('Sessions: JWTs end with their session', () => {
  async function meStatus(jwt: string): Promise<number> {
    const response = await fetch(`${baseUrl()}/auth/api-keys`, {
      headers: { authorization: `Bearer ${jwt}` },
    })
    await response.body?.cancel()
    return response.status
  }

  test('after sign-out the JWT it issued is refused at once, not in 7 days', async ({ assert }) => {
    const user = await createUser()
    const session = await sessionData(user.email)
    assert.equal(await meStatus(session.token), 200)
    const out = await fetch(`${baseUrl()}/auth/logout`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'authorization': `Bearer ${session.token}` },
      body: JSON.stringify({ refreshToken: session.refreshToken }),
    })
    assert.equal(out.status, 200)
    assert.equal(await meStatus(session.token), 401)
    // A new sign-in works.
    const again = await sessionData(user.email)
    assert.equal(await meStatus(again.token), 200)
  })

  test('logout without a refresh token ends the JWT it is sent with; an ended JWT cannot sign anyone out', async ({
    assert,
  }) => {
    const user = await createUser()
    const session = await sessionData(user.email)
    assert.equal(await meStatus(session.token), 200)
    const tokenVersion = async () => {
      const row = await db.from('users').where('id', user.id).select('token_version').first()
      return Number(row.token_version)
    }
    const versionBefore = await tokenVersion()
    const logout = (jwt: string) =>
      fetch(`${baseUrl()}/auth/logout`, {
        method: 'POST',
        headers: { authorization: `Bearer ${jwt}` },
      })
    const out = await logout(session.token)
    assert.equal(out.status, 200)
    const answer: any = await out.json()
    assert.isTrue(answer.data.loggedOut)
    assert.equal(await meStatus(session.token), 401, 'the JWT is refused at once')
    // Recorded in the users row every instance's guard reads (not in this process only).
    assert.isAbove(await tokenVersion(), versionBefore)

    // The ended JWT sent to logout again leaves a new session alone.
    const again = await sessionData(user.email)
    const stale = await logout(session.token)
    assert.equal(stale.status, 200)
    assert.equal(await meStatus(again.token), 200)
  })

  test('reusing a rotated refresh token revokes the family and ends its JWTs', async ({
    assert,
  }) => {
    const user = await createUser()
    const first = await sessionData(user.email)
    const rotated = await refreshData(first.refreshToken)
    assert.equal(await meStatus(rotated.token), 200)
    const reuse = await refreshWith({ body: { refreshToken: first.refreshToken } })
    assert.equal(reuse.status, 401)
    assert.equal(await meStatus(rotated.token), 401, 'the thief and the owner both sign in again')
  })
})

test.group('Sign-in limits per client address', () => {
  test('failures from one client are limited whatever the e-mail; the client address comes from the trusted proxy', async ({
    assert,
  }) => {
    const client = `198.51.100.${Math.floor(Math.random() * 200) + 20}`
    const attempt = async (from: string, index: number) => {
      const response = await fetch(`${baseUrl()}/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': from },
        body: JSON.stringify({
          email: `nobody-${index}-${Date.now()}@example.test`,
          password: 'wrong-pass-1',
        }),
      })
      await response.body?.cancel()
      return response
    }
    const statusFrom = async (from: string, index: number) => {
      const response = await attempt(from, index)
      return response.status
    }
    for (let i = 0; i < 100; i++) assert.equal(await statusFrom(client, i), 401)
    const limited = await attempt(client, 100)
    assert.equal(limited.status, 429)
    assert.isNotNull(limited.headers.get('retry-after'))
    // Another client behind the same proxy is not affected.
    assert.equal(await statusFrom('203.0.113.7', 101), 401)
  }).timeout(60_000)
})

test.group('Sign-in limits per e-mail across client addresses', (group) => {
  group.each.setup(() => {
    const previous = identityLimits.loginFailuresPerAddress
    return () => {
      identityLimits.loginFailuresPerAddress = previous
    }
  })

  const signIn = async (email: string, password: string, from: string) => {
    const response = await fetch(`${baseUrl()}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': from },
      body: JSON.stringify({ email, password }),
    })
    const body = (await response.json()) as any
    return { status: response.status, body, retryAfter: response.headers.get('retry-after') }
  }
  const signInStatus = async (email: string, password: string, from: string) => {
    const answer = await signIn(email, password, from)
    return answer.status
  }
  const randomClient = () => `192.0.2.${Math.floor(Math.random() * 250) + 1}`

  test('failures for one e-mail from many client addresses are capped; a client that signed in before still gets in', async ({
    assert,
  }) => {
    identityLimits.loginFailuresPerAddress = 3
    const user = await createUser()
    const home = `203.0.113.${Math.floor(Math.random() * 200) + 20}`
    assert.equal(await signInStatus(user.email, TEST_PASSWORD, home), 200, 'the owner, before')

    // A spray: one wrong guess from each of three new client addresses.
    const spray = [1, 2, 3].map((n) => `198.18.${n}.${Math.floor(Math.random() * 250) + 1}`)
    for (const from of spray) {
      assert.equal(await signInStatus(user.email, 'wrong-guess-1', from), 401)
    }
    // Any new client address is now held off, even with the right password.
    const fourth = await signIn(user.email, TEST_PASSWORD, randomClient())
    assert.equal(fourth.status, 429)
    assert.equal(fourth.body.code, 'RATE_LIMIT_EXCEEDED')
    assert.isAbove(Number(fourth.retryAfter), 0)

    // The owner's usual client address is not locked out by the spray.
    assert.equal(await signInStatus(user.email, TEST_PASSWORD, home), 200, 'the owner, after')
    // Other accounts are not affected.
    const other = await createUser()
    assert.equal(await signInStatus(other.email, TEST_PASSWORD, randomClient()), 200)
  }).timeout(60_000)
})
