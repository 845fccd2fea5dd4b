import { randomUUID } from 'node:crypto'
import { test } from '@japa/runner'
import router from '@adonisjs/core/services/router'
import { isExcluded } from '#core/openapi/openapi_service'
import { baseUrl } from '#tests/helpers/http'
import { apiKeyFor, createUser, jwtFor, uniqueEmail, uniqueUsername } from '#tests/helpers/identity'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { storedConfigOf } from '#tests/helpers/agents_http'

/**
 * The input gate (app/core/http/input_gate_middleware.ts): control
 * characters and unpaired surrogates are a 400 naming the field on every
 * route, before any query runs, so none of them can reach PostgreSQL (which
 * refuses NUL) and come back as a 500.
 */
const BAD_STRINGS = ['nul\u0000inside', 'lone \uD800 surrogate', 'bell\u0007', 'low \uDC00 first']

/** Every string field any route reads, each set to the bad string. */
function hostileBody(bad: string) {
  return {
    message: bad,
    name: bad,
    email: bad,
    username: bad,
    password: bad,
    label: bad,
    subject: bad,
    body: bad,
    category: bad,
    content: bad,
    path: bad,
    filename: bad,
    cron: bad,
    timezone: bad,
    query: bad,
    mintAddress: bad,
    skillId: bad,
    channel: bad,
    reason: bad,
    description: bad,
    commitMessage: bad,
    systemPrompt: bad,
    refreshToken: bad,
    txSignature: bad,
    tier: bad,
    addonKey: bad,
    address: bad,
    signature: bad,
    wallets: [bad],
    ids: [bad],
    history: [{ role: 'user', content: bad }],
    messages: [{ role: 'user', content: bad }],
    config: { personality: bad },
  }
}

function routes() {
  return router
    .toJSON()
    .root.filter((route) => !isExcluded(route.pattern) && !route.pattern.startsWith('/__transmit'))
    .flatMap((route) =>
      route.methods
        .filter((m) => m !== 'HEAD' && m !== 'OPTIONS')
        .map((method) => ({ method, route }))
    )
}

test.group('Input gate', (group) => {
  let jwt: string
  let apiKey: string
  let agentId: string

  group.setup(async () => {
    const user = await createUser({ credits: 100 })
    jwt = jwtFor(user)
    apiKey = await apiKeyFor(user)
    const agent = await createAgentFor(user, { status: 'stopped' })
    agentId = agent.id
  })

  test('every route refuses control characters and lone surrogates in bodies and queries with 400', async ({
    assert,
  }) => {
    const failures: string[] = []
    for (const { method, route } of routes()) {
      const path = route.pattern
        // Parameters with a uuid matcher (`:id`, `:backupId`) must match it to reach the gate.
        .replace(/:(\w+)\??/g, (_, name) =>
          name === 'id' ? agentId : name.endsWith('Id') ? randomUUID() : 'x'
        )
        .replace(/\*/g, 'x')
      const token = route.pattern.startsWith('/api/v1') ? apiKey : jwt
      for (const bad of BAD_STRINGS) {
        const hasBody = !['GET', 'DELETE'].includes(method)
        // A URL cannot carry a lone surrogate: queries get the control characters only.
        const inQuery = hasBody || !bad.isWellFormed() ? 'fine' : bad
        if (!hasBody && inQuery === 'fine') continue
        const url = `${baseUrl()}${path}?q=${encodeURIComponent(inQuery)}`
        const answer = await fetch(url, {
          method,
          headers: { 'content-type': 'application/json', 'authorization': `Bearer ${token}` },
          body: hasBody ? JSON.stringify(hostileBody(bad)) : undefined,
        })
        const text = await answer.text()
        let code: string | undefined
        try {
          code = JSON.parse(text).code
        } catch {}
        if (answer.status !== 400 || code !== 'VALIDATION_ERROR') {
          failures.push(
            `${method} ${route.pattern} ${JSON.stringify(bad)} -> ${answer.status} ${text.slice(0, 100)}`
          )
        }
      }
    }
    assert.deepEqual(failures, [])
  }).timeout(120_000)

  test('the error names the field, also deep inside an object or array', async ({
    client,
    assert,
  }) => {
    const patched = await client
      .patch(`/agents/${agentId}`)
      .bearerToken(jwt)
      .json({ config: { personality: 'calm', nested: { list: ['ok', 'no\u0000'] } } })
    patched.assertStatus(400)
    assert.include(patched.body().error, 'config.nested.list[1]')
    const config = await storedConfigOf(agentId)
    assert.notProperty(config, 'nested')

    const key = await client
      .patch(`/agents/${agentId}`)
      .bearerToken(jwt)
      .json({ config: { 'bad\u0001key': 1 } })
    key.assertStatus(400)
    assert.include(key.body().error, 'config.bad')
  })

  test('tab, LF and CR pass in free text but not in identifiers', async ({ client, assert }) => {
    const ticket = await client
      .post('/support/tickets')
      .bearerToken(jwt)
      .json({ subject: 'Multi-line', body: 'line one\r\n\tline two', category: 'technical' })
    ticket.assertStatus(201)
    assert.equal(ticket.body().data.body, 'line one\r\n\tline two')

    const register = await client.post('/auth/register').json({
      email: uniqueEmail(),
      username: `ab\ncd${uniqueUsername()}`,
      password: 'long-enough-password',
    })
    register.assertStatus(400)
    assert.include(register.body().error, 'username')
  })

  test('an e-mail with an unpaired surrogate is a 400, not a 500', async ({ client, assert }) => {
    const answer = await client.post('/auth/register').json({
      email: `a\uD83Db@example.test`,
      username: uniqueUsername(),
      password: 'long-enough-password',
    })
    answer.assertStatus(400)
    assert.equal(answer.body().code, 'VALIDATION_ERROR')
    assert.include(answer.body().error, 'email')
  })

  test('route params and query strings allow no control characters', async ({ client, assert }) => {
    const param = await fetch(`${baseUrl()}/agents/by-slug/abc%00def`)
    assert.equal(param.status, 400)
    const query = await client.get('/ai-credits/history').qs({ limit: '1\n' }).bearerToken(jwt)
    query.assertStatus(400)
    assert.equal(query.body().code, 'VALIDATION_ERROR')
  })

  test('a JSON body must be an object: an array is a 400, even where every field is optional', async ({
    assert,
  }) => {
    // It used to be read as an object keyed "0", "1"... (found by the fuzz on POST /auth/logout).
    const answer = await fetch(`${baseUrl()}/auth/logout`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([null, null]),
    })
    assert.equal(answer.status, 400)
    assert.deepEqual(await answer.json(), {
      success: false,
      error: 'The request body must be a JSON object',
      code: 'VALIDATION_ERROR',
    })
  })
})
