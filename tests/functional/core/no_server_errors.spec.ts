import { test } from '@japa/runner'
import router from '@adonisjs/core/services/router'
import { baseUrl } from '#tests/helpers/http'
import { apiKeyFor, createUser, jwtFor } from '#tests/helpers/identity'

/**
 * "No route answers a 500 for anything a client can send": every route of
 * the live router is called with hostile parameters, query strings and
 * bodies, with and without valid credentials, and must never answer 5xx
 * (503 for an unconfigured dependency is allowed) nor leave the envelope.
 */
const PARAM_VALUES = [
  'not-a-uuid',
  '00000000-0000-0000-0000-000000000000',
  "1' or '1'='1",
  '%2e%2e%2fetc%2fpasswd',
  '99999999999999999999',
]

const BODIES: unknown[] = [
  {},
  [],
  { message: 12, name: {}, email: [], config: 'x', ids: 'nope', limit: -1 },
  { message: 'x'.repeat(5000), history: Array.from({ length: 50 }, () => ({ role: 'x' })) },
  { path: '../../etc/passwd', content: null, txSignature: 'zzz', tier: 'gold' },
]

const QUERIES = ['', '?limit=abc&page=-1&offset=x&tail=-5&stream=maybe&path=%00']

function routes() {
  const all = Object.values(router.toJSON()).flat() as Array<{ pattern: string; methods: string[] }>
  return all
    .filter((route) => !route.pattern.startsWith('/__test'))
    .flatMap((route) =>
      route.methods.filter((method) => method !== 'HEAD').map((method) => ({ method, route }))
    )
}

function fill(pattern: string, value: string) {
  return pattern.replace(/:(\w+)\??/g, () => encodeURIComponent(value)).replace(/\*/g, 'any/thing')
}

test.group('No server errors for client input', (group) => {
  let credentials: { jwt: string; apiKey: string }

  group.setup(async () => {
    const user = await createUser({ credits: 10 })
    credentials = { jwt: jwtFor(user), apiKey: await apiKeyFor(user) }
  })

  test('every route answers hostile input without a 5xx', async ({ assert }) => {
    const failures: string[] = []

    for (const { method, route } of routes()) {
      const token = route.pattern.startsWith('/api/v1') ? credentials.apiKey : credentials.jwt
      for (const value of PARAM_VALUES) {
        for (const query of QUERIES) {
          const bodies = method === 'GET' || method === 'DELETE' ? [undefined] : BODIES
          for (const body of bodies) {
            for (const auth of [true, false]) {
              const url = `${baseUrl()}${fill(route.pattern, value)}${query}`
              const controller = new AbortController()
              const timer = setTimeout(() => controller.abort(), 5000)
              try {
                const response = await fetch(url, {
                  method,
                  signal: controller.signal,
                  headers: {
                    'content-type': 'application/json',
                    ...(auth ? { authorization: `Bearer ${token}` } : {}),
                  },
                  body: body === undefined ? undefined : JSON.stringify(body),
                })
                const type = response.headers.get('content-type') ?? ''
                const text = type.includes('event-stream') ? '' : await response.text()
                if (response.status >= 500 && response.status !== 503) {
                  failures.push(
                    `${method} ${url} auth=${auth} -> ${response.status} ${text.slice(0, 120)}`
                  )
                } else if (response.status >= 400 && type.includes('json')) {
                  const json = JSON.parse(text)
                  if (json.success !== false || typeof json.code !== 'string') {
                    failures.push(`${method} ${url} -> ${response.status} outside the envelope`)
                  }
                }
              } catch (error) {
                if ((error as Error).name !== 'AbortError') {
                  failures.push(`${method} ${url} -> ${(error as Error).message}`)
                }
              } finally {
                clearTimeout(timer)
                controller.abort()
              }
            }
          }
        }
      }
    }

    assert.deepEqual(failures, [])
  }).timeout(600_000)
})
