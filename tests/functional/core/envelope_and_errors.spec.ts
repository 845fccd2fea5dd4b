import { connect } from 'node:net'
import { test } from '@japa/runner'
import { baseUrl, postRaw } from '#tests/helpers/http'

test.group('Envelope and errors', () => {
  test('a JSON success answer is enveloped and carries X-Request-Id', async ({
    client,
    assert,
  }) => {
    const response = await client.post('/__test/echo').json({ name: 'Ada', count: 2 })
    response.assertStatus(200)
    assert.deepEqual(response.body(), { success: true, data: { name: 'Ada', count: 2 } })
    assert.match(response.header('x-request-id') ?? '', /^[\w-]{8,}$/)
  })

  test('a client-sent X-Request-Id is echoed back', async ({ client, assert }) => {
    const response = await client.get('/health').header('x-request-id', 'trace-abc-123')
    assert.equal(response.header('x-request-id'), 'trace-abc-123')
  })

  test('plain text answers are not wrapped', async ({ client, assert }) => {
    const response = await client.get('/__test/text')
    response.assertStatus(200)
    assert.equal(response.text(), 'plain line\n')
  })

  test('{kind} maps to {status} {code}')
    .with([
      { kind: 'auth', status: 401, code: 'AUTH_REQUIRED' },
      { kind: 'forbidden', status: 403, code: 'FORBIDDEN' },
      { kind: 'not-found', status: 404, code: 'NOT_FOUND' },
      { kind: 'insufficient-credits', status: 402, code: 'INSUFFICIENT_CREDITS' },
      { kind: 'agent-not-running', status: 409, code: 'AGENT_NOT_RUNNING' },
      { kind: 'gone', status: 410, code: 'GONE' },
      { kind: 'content-blocked', status: 422, code: 'CONTENT_BLOCKED' },
      { kind: 'rate-limit', status: 429, code: 'RATE_LIMIT_EXCEEDED' },
    ])
    .run(async ({ client, assert }, row) => {
      const response = await client.get(`/__test/errors/${row.kind}`)
      response.assertStatus(row.status)
      assert.equal(response.body().success, false)
      assert.equal(response.body().code, row.code)
      assert.isString(response.body().error)
      assert.isNotEmpty(response.body().error)
      assert.isString(response.header('x-request-id'))
    })

  test('validation failure names the field and the rule', async ({ client, assert }) => {
    const response = await client.post('/__test/echo').json({ name: 'A' })
    response.assertStatus(400)
    assert.equal(response.body().code, 'VALIDATION_ERROR')
    assert.include(response.body().error, 'name')
    assert.include(response.body().error, 'minLength')
    assert.deepEqual(Object.keys(response.body()).sort(), ['code', 'error', 'success'])
  })

  test('malformed JSON is a 400 VALIDATION_ERROR', async ({ assert }) => {
    const response = await postRaw('/__test/echo', '{"name": "Ada",')
    assert.equal(response.status, 400)
    assert.equal(response.json.code, 'VALIDATION_ERROR')
    assert.match(response.json.error, /JSON/)
    assert.isString(response.headers.get('x-request-id'))
  })

  test('a JSON scalar body is a 400 VALIDATION_ERROR', async ({ assert }) => {
    const response = await postRaw('/__test/echo', '"just a string"')
    assert.equal(response.status, 400)
    assert.equal(response.json.code, 'VALIDATION_ERROR')
  })

  test('a JSON body nested too deep to parse is a 400', async ({ assert }) => {
    const depth = 20_000
    const response = await postRaw('/__test/echo', '['.repeat(depth) + ']'.repeat(depth))
    assert.equal(response.status, 400)
    assert.equal(response.json.code, 'VALIDATION_ERROR')
  })

  test('a body over the size limit is a 413', async ({ assert }) => {
    const response = await postRaw('/__test/echo', JSON.stringify({ name: 'x'.repeat(2 << 20) }))
    assert.equal(response.status, 413)
    assert.deepInclude(response.json, { success: false, code: 'VALIDATION_ERROR' })
  })

  test('a malformed percent-encoded path is a 400 in the envelope', async ({ assert }) => {
    const response = await fetch(`${baseUrl()}/referrals/validate/%ff%00`)
    assert.equal(response.status, 400)
    assert.deepEqual(await response.json(), {
      success: false,
      error: 'Malformed URL: invalid percent-encoding',
      code: 'VALIDATION_ERROR',
    })
    assert.isString(response.headers.get('x-request-id'))
  })

  test('an unknown route is a 404 NOT_FOUND', async ({ client, assert }) => {
    const response = await client.get('/no/such/route')
    response.assertStatus(404)
    assert.deepEqual(response.body(), {
      success: false,
      error: 'Route not found',
      code: 'NOT_FOUND',
    })
  })

  test('a known path asked with a method it lacks is a 405 with Allow', async ({ assert }) => {
    const response = await fetch(`${baseUrl()}/agents`, { method: 'PUT' })
    assert.equal(response.status, 405)
    const allowed = (response.headers.get('allow') ?? '').split(', ')
    assert.includeMembers(allowed, ['GET', 'HEAD', 'POST'])
    assert.notInclude(allowed, 'PUT')
    assert.deepEqual(await response.json(), {
      success: false,
      error: `PUT is not allowed on /agents; it allows ${allowed.join(', ')}`,
      code: 'NOT_FOUND',
    })
    // A path with parameters is matched as the router matches it.
    const agentPath = await fetch(`${baseUrl()}/agents/some-id/chat/stream`, { method: 'GET' })
    assert.equal(agentPath.status, 405)
    assert.include(agentPath.headers.get('allow') ?? '', 'POST')
  })

  test('an unexpected error is a bare 500 with no internal detail', async ({ client, assert }) => {
    const response = await client.get('/__test/errors/unexpected')
    response.assertStatus(500)
    assert.deepEqual(response.body(), {
      success: false,
      error: 'Internal server error',
      code: 'SERVER_ERROR',
    })
    assert.notInclude(response.text(), 'secret_table')
    assert.notInclude(response.text(), 'hunter2')
  })
})

test.group("Requests Node's HTTP parser refuses", () => {
  test('a header with forbidden bytes gets a 400 in the envelope, not an empty answer', async ({
    assert,
  }) => {
    const { hostname, port } = new URL(baseUrl())
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => {
        socket.write(`GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\u0001b\r\n\r\n`)
      })
      let data = ''
      socket.on('data', (chunk) => (data += chunk))
      socket.on('end', () => resolve(data))
      socket.on('error', reject)
    })
    assert.match(raw, /^HTTP\/1\.1 400/)
    const body = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))
    assert.deepEqual(body, {
      success: false,
      error: 'The request could not be parsed',
      code: 'VALIDATION_ERROR',
    })
  })
})
