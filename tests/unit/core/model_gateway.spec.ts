import { test } from '@japa/runner'
import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mapError } from '#core/http/error_envelope'
import {
  ModelGatewayError,
  UpstreamRefusedRequestError,
  type UpstreamParty,
} from '#core/openai/gateway_errors'
import { modelGateway, type ModelEndpoint } from '#core/openai/model_gateway'
import { emptyCompletion } from '#core/openai/wire'

/**
 * The model gateway's one failure mapping, against a real local upstream
 * that misbehaves in each way a provider or a framework can: what the
 * caller's client sees (status, envelope code, message) for each.
 */
type Handler = (response: ServerResponse, body: any) => void

const chunk = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`
const delta = (content: string) => chunk({ choices: [{ delta: { content } }] })

function sse(response: ServerResponse) {
  response.writeHead(200, { 'content-type': 'text/event-stream' })
}

function json(response: ServerResponse, status: number, body: unknown) {
  response.writeHead(status, { 'content-type': 'application/json' })
  response.end(typeof body === 'string' ? body : JSON.stringify(body))
}

const HANDLERS: Record<string, Handler> = {
  '/ok': (response, body) =>
    json(response, 200, {
      model: 'served-model',
      choices: [{ message: { content: `echo ${body.messages[0].content}` } }],
      usage: { prompt_tokens: 4, completion_tokens: 2 },
    }),
  '/status-502': (response) => json(response, 502, { error: { message: 'upstream overloaded' } }),
  '/status-400': (response) => json(response, 400, { error: { message: 'bad temperature' } }),
  '/status-401': (response) => json(response, 401, { error: { message: 'invalid key' } }),
  '/status-500-text': (response) => json(response, 500, 'plain failure text'),
  '/not-json': (response) => json(response, 200, '<html>gateway</html>'),
  '/error-body': (response) => json(response, 200, { error: { message: 'model not loaded' } }),
  '/tool-call': (response) =>
    json(response, 200, { choices: [{ message: { content: null, tool_calls: [] } }] }),
  '/hang': () => {},
  '/stream-ok': (response) => {
    sse(response)
    response.end(`${delta('one ')}${delta('two')}${chunk({ choices: [] })}data: [DONE]\n\n`)
  },
  '/stream-error': (response) => {
    sse(response)
    response.end(`${delta('one ')}${chunk({ error: { message: 'rate limited mid-answer' } })}`)
  },
  '/stream-no-done': (response) => {
    sse(response)
    response.end(`${delta('one ')}${delta('two')}`)
  },
  '/stream-cut': (response) => {
    sse(response)
    response.write(delta('one '), () => setTimeout(() => response.destroy(), 20))
  },
  '/stream-stall': (response) => {
    sse(response)
    response.write(delta('one '))
  },
}

let server: Server
let base = ''

function endpoint(path: string, party: Partial<UpstreamParty> = {}): ModelEndpoint {
  return {
    url: `${base}${path}`,
    party: { name: 'The upstream', ...party },
    timeoutMs: 1000,
    idleTimeoutMs: 600,
  }
}

const BODY = { model: 'asked-model', messages: [{ role: 'user', content: 'hi' }] }

async function failureOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise
  } catch (error) {
    return error as Error
  }
  throw new Error('expected a failure')
}

async function readStream(path: string, signal?: AbortSignal) {
  const reply = emptyCompletion('asked-model')
  const tokens: string[] = []
  const chunks = await modelGateway.stream(
    endpoint(path),
    { ...BODY, stream: true },
    {
      reply,
      signal,
    }
  )
  for await (const item of chunks) if (item.token) tokens.push(item.token)
  return { tokens, reply }
}

test.group('Model gateway: whole completions and their failures', (group) => {
  group.setup(async () => {
    server = createServer((request, response) => {
      let raw = ''
      request.on('data', (part) => (raw += part))
      request.on('end', () => HANDLERS[request.url!](response, raw ? JSON.parse(raw) : {}))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    return async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  test('a completion: its text, the model it names, its usage', async ({ assert }) => {
    const reply = await modelGateway.complete(endpoint('/ok'), BODY)
    assert.equal(reply.content, 'echo hi')
    assert.equal(reply.model, 'served-model')
    assert.deepEqual(reply.usage, { inputTokens: 4, outputTokens: 2 })
  })

  test('nobody listening, or no answer within the bound: 503 "is unavailable"', async ({
    assert,
  }) => {
    const closed = await failureOf(
      modelGateway.complete({ ...endpoint('/ok'), url: 'http://127.0.0.1:9/v1' }, BODY)
    )
    assert.instanceOf(closed, ModelGatewayError)
    assert.equal((closed as ModelGatewayError).kind, 'unavailable')
    assert.match(closed.message, /^The upstream is unavailable: unreachable: .*ECONNREFUSED/)
    assert.deepInclude(mapError(closed), { status: 503, unexpected: false })
    assert.equal(mapError(closed).body.code, 'SERVER_ERROR')

    const hung = await failureOf(modelGateway.complete(endpoint('/hang'), BODY))
    assert.equal((hung as ModelGatewayError).kind, 'unavailable')
    assert.equal(hung.message, 'The upstream is unavailable: no answer within 1 s')
  })

  test('an error status: 503 naming the status and what the body says', async ({ assert }) => {
    const failed = await failureOf(modelGateway.complete(endpoint('/status-502'), BODY))
    assert.instanceOf(failed, ModelGatewayError)
    assert.equal((failed as ModelGatewayError).upstreamStatus, 502)
    assert.equal(failed.message, 'The upstream answered 502: upstream overloaded')
    assert.equal(mapError(failed).status, 503)

    const text = await failureOf(modelGateway.complete(endpoint('/status-500-text'), BODY))
    assert.equal(text.message, 'The upstream answered 500: plain failure text')
  })

  test("a refusal of the client's own body is the client's 400; of ours, a 503", async ({
    assert,
  }) => {
    const forwarded = await failureOf(
      modelGateway.complete(endpoint('/status-400', { clientBody: true }), BODY)
    )
    assert.instanceOf(forwarded, UpstreamRefusedRequestError)
    assert.equal(forwarded.message, 'The upstream refused the request: bad temperature')
    assert.deepEqual(mapError(forwarded).body, {
      success: false,
      error: 'The upstream refused the request: bad temperature',
      code: 'VALIDATION_ERROR',
    })
    assert.equal(mapError(forwarded).status, 400)

    const ours = await failureOf(modelGateway.complete(endpoint('/status-400'), BODY))
    assert.instanceOf(ours, ModelGatewayError)
    assert.equal(mapError(ours).status, 503)
    // A server error is never the client's, whoever wrote the body.
    const down = await failureOf(
      modelGateway.complete(endpoint('/status-502', { clientBody: true }), BODY)
    )
    assert.equal(mapError(down).status, 503)
  })

  test('401 or 403 names the refused credential when the party has one', async ({ assert }) => {
    const keyed = await failureOf(
      modelGateway.complete(endpoint('/status-401', { credential: "the agent's API key" }), BODY)
    )
    assert.equal(keyed.message, "The upstream refused the agent's API key (401): invalid key")
    assert.equal(mapError(keyed).status, 503)
    const plain = await failureOf(modelGateway.complete(endpoint('/status-401'), BODY))
    assert.equal(plain.message, 'The upstream answered 401: invalid key')
  })

  test('a 2xx that is no completion: unreadable, or the error it reports', async ({ assert }) => {
    const html = await failureOf(modelGateway.complete(endpoint('/not-json'), BODY))
    assert.equal((html as ModelGatewayError).kind, 'unreadable')
    assert.equal(html.message, 'The upstream answered something unreadable (no choices)')
    assert.equal(mapError(html).status, 503)

    const reported = await failureOf(modelGateway.complete(endpoint('/error-body'), BODY))
    assert.equal((reported as ModelGatewayError).kind, 'reported')
    assert.equal(reported.message, 'The upstream failed: model not loaded')

    // A tool call has no text: fine for the proxy, not for a caller that needs the text.
    const toolCall = await modelGateway.complete(endpoint('/tool-call'), BODY)
    assert.isNull(toolCall.content)
    assert.equal(toolCall.model, 'asked-model')
    const needsText = await failureOf(
      modelGateway.complete(endpoint('/tool-call'), BODY, { requireContent: true })
    )
    assert.equal(needsText.message, 'The upstream answered something unreadable (no content)')
  })
})

test.group('Model gateway: streams and their failures', (group) => {
  group.setup(async () => {
    server = createServer((request, response) => {
      request.resume()
      request.on('end', () => HANDLERS[request.url!](response, {}))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    return async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  test('a whole stream: tokens in order, the reply with its end marker', async ({ assert }) => {
    const { tokens, reply } = await readStream('/stream-ok')
    assert.deepEqual(tokens, ['one ', 'two'])
    assert.deepInclude(reply, { content: 'one two', model: 'asked-model', done: true })
  })

  test('a refusal is thrown when the stream is opened, before any chunk is read', async ({
    assert,
  }) => {
    const refused = await failureOf(
      modelGateway.stream(endpoint('/status-400', { clientBody: true }), BODY)
    )
    assert.instanceOf(refused, UpstreamRefusedRequestError)
  })

  test('an error chunk, a broken connection, a stall, an end without [DONE]: 503 each; the reply keeps what came', async ({
    assert,
  }) => {
    const cases = [
      ['/stream-error', 'reported', 'The upstream failed: rate limited mid-answer', 'one '],
      ['/stream-cut', 'broke_off', /^The upstream broke off: /, 'one '],
      [
        '/stream-stall',
        'broke_off',
        'The upstream broke off: the stream stalled: nothing for 1 s',
        'one ',
      ],
      ['/stream-no-done', 'cut_short', 'The upstream ended the stream early', 'one two'],
    ] as const
    for (const [path, kind, message, generated] of cases) {
      const reply = emptyCompletion('asked-model')
      const chunks = await modelGateway.stream(endpoint(path), BODY, { reply })
      const failed = await failureOf(
        (async () => {
          for await (const item of chunks) void item
        })()
      )
      assert.instanceOf(failed, ModelGatewayError, path)
      assert.equal((failed as ModelGatewayError).kind, kind, path)
      if (typeof message === 'string') assert.equal(failed.message, message, path)
      else assert.match(failed.message, message, path)
      assert.equal(mapError(failed).status, 503, path)
      assert.equal(reply.content, generated, path)
      assert.isFalse(reply.done, path)
    }
  })

  test("the caller's own abort is rethrown as it is, not as the upstream's failure", async ({
    assert,
  }) => {
    const controller = new AbortController()
    const reason = new Error('the client went away')
    setTimeout(() => controller.abort(reason), 50)
    const failed = await failureOf(readStream('/stream-stall', controller.signal))
    // The caller's own reason, mid-stream or before the answer: nobody reads it as the upstream's failure.
    assert.strictEqual(failed, reason)
    const beforeHeaders = await failureOf(
      modelGateway.complete(endpoint('/hang'), BODY, { signal: AbortSignal.abort(reason) })
    )
    assert.strictEqual(beforeHeaders, reason)
  })
})
