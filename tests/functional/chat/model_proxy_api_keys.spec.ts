import { test } from '@japa/runner'
import { spawn } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import app from '@adonisjs/core/services/app'
import db from '@adonisjs/lucid/services/db'
import { createUser, creditsOf, jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import {
  readSse,
  startModelUpstream,
  useUpstream,
  type ModelUpstream,
} from '#tests/helpers/model_upstream'

/** The `openai` SDK example of docs/chat.md, exactly as written there. */
async function documentedExample(): Promise<string> {
  const docs = await readFile(app.makePath('docs/chat.md'), 'utf8')
  const example = /```js\n(import OpenAI from 'openai'[\s\S]*?)```/.exec(docs)
  if (!example) throw new Error('docs/chat.md has no openai SDK example')
  return example[1]
}

/**
 * Runs the example in a child Node process (the project's Node 24 and its
 * `openai` package) against the running test server; answers its output.
 */
async function runExample(apiKey: string): Promise<{ code: number | null; stdout: string }> {
  const code = await documentedExample()
  const child = spawn(process.execPath, ['--input-type=module'], {
    cwd: app.makePath(),
    env: { ...process.env, AGENT_HOST_API_KEY: apiKey, AGENT_HOST_URL: baseUrl() },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk) => (stdout += chunk))
  child.stderr.on('data', (chunk) => (stderr += chunk))
  child.stdin.end(code)
  const exit = await new Promise<number | null>((resolve) => child.on('close', resolve))
  if (exit !== 0) throw new Error(`the docs example failed (${exit}): ${stderr}`)
  return { code: exit, stdout }
}

/** An API key made the way a user makes one: POST /auth/api-keys with their JWT. */
async function userWithApiKey(credits: number) {
  const user = await createUser({ credits })
  const response = await fetch(`${baseUrl()}/auth/api-keys`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'authorization': `Bearer ${jwtFor(user)}` },
    body: JSON.stringify({ label: 'sdk' }),
  })
  const body: any = await response.json()
  if (response.status !== 200 && response.status !== 201) {
    throw new Error(`API key not created: ${JSON.stringify(body)}`)
  }
  return { user, key: body.data.key as string, keyId: body.data.id as string }
}

async function history(user: { id: string }) {
  const response = await fetch(`${baseUrl()}/ai-credits/history`, {
    headers: { authorization: `Bearer ${jwtFor(user)}` },
  })
  return ((await response.json()) as any).data.usage as any[]
}

/**
 * Users call the OpenAI-compatible proxy with their own API key (issue 30
 * item 6): metered to their account like agents' usage, same models and
 * holds; unknown models are 400 naming `model` with or without an upstream.
 */
test.group('Model proxy: users with their API key (the docs/chat.md example)', (group) => {
  let upstream: ModelUpstream
  group.setup(async () => {
    upstream = await startModelUpstream()
    return () => upstream.close()
  })
  group.each.setup(() => upstream.reset())

  test('the documented SDK example runs as written: answer, metered to the account, unknown model 400', async ({
    assert,
  }) => {
    // 1 credit per input token, 2 per output token for the example's model.
    const restore = useUpstream(upstream, {
      rates: { 'gpt-4o-mini': { input: 1_000_000, output: 2_000_000 } },
    })
    try {
      const { user, key, keyId } = await userWithApiKey(5000)
      assert.match(key, /^hk_/)
      upstream.set({
        reply: 'Hello from upstream',
        usage: { prompt_tokens: 20, completion_tokens: 5 },
      })

      const { stdout } = await runExample(key)
      const [answer, refusal] = stdout.trim().split('\n')
      assert.equal(answer, 'Hello from upstream')
      assert.match(refusal, /^400 /)
      assert.include(refusal, 'no-such-model')
      assert.include(refusal, 'is not offered here')

      assert.lengthOf(upstream.requests, 1, 'the unknown model never reached the provider')
      assert.equal(upstream.requests[0].body.model, 'gpt-4o-mini')
      assert.equal(await creditsOf(user), 5000 - 30)
      const [entry] = await db.from('credit_ledger').where({ user_id: user.id, kind: 'llm' })
      assert.deepInclude(entry, { credits: -30, model: 'gpt-4o-mini', input_tokens: 20 })
      assert.deepInclude(entry.metadata, { source: 'api_key', agentId: null, apiKeyId: keyId })
      const usage = await history(user)
      assert.lengthOf(usage, 1)
      assert.deepInclude(usage[0], { kind: 'llm', model: 'gpt-4o-mini', credits: 30 })
    } finally {
      restore()
    }
  })

  test('without MODEL_API_URL: local-dev answers the example, free, and no-such-model is still 400', async ({
    assert,
  }) => {
    const { user, key } = await userWithApiKey(100)
    const { stdout } = await runExample(key)
    const [answer, refusal] = stdout.trim().split('\n')
    assert.include(answer, 'local-dev')
    assert.match(refusal, /^400 /)
    assert.include(refusal, 'no-such-model')
    // The envelope names the field.
    const direct = await fetch(`${baseUrl()}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'authorization': `Bearer ${key}` },
      body: JSON.stringify({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
    })
    assert.equal(direct.status, 400)
    const refused: any = await direct.json()
    assert.equal(refused.code, 'VALIDATION_ERROR')
    assert.match(refused.error, /^model: "no-such-model" is not offered here/)
    assert.equal(await creditsOf(user), 100)
    assert.lengthOf(await history(user), 0, 'free calls are not debits')
    assert.lengthOf(upstream.requests, 0)
  })

  test('API key callers get the same holds: streamed answers metered, a 900 KB tool on a small balance 402', async ({
    assert,
  }) => {
    const restore = useUpstream(upstream, {
      rates: { 'metered-model': { input: 1_000_000, output: 2_000_000 } },
    })
    try {
      const { user, key } = await userWithApiKey(5000)
      const call = (body: Record<string, unknown>) =>
        fetch(`${baseUrl()}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'authorization': `Bearer ${key}` },
          body: JSON.stringify({ model: 'metered-model', ...body }),
        })
      upstream.set({ reply: 'one two', usage: { prompt_tokens: 10, completion_tokens: 2 } })
      const streamed = await call({ messages: [{ role: 'user', content: 'hi' }], stream: true })
      assert.equal(streamed.status, 200)
      const { events } = await readSse(streamed)
      assert.equal(events.at(-1), '[DONE]')
      assert.equal(await creditsOf(user), 5000 - 14)

      upstream.reset()
      const huge = await call({
        max_tokens: 300,
        messages: [{ role: 'user', content: 'hi' }],
        tools: [{ type: 'function', function: { name: 'f', description: 'x'.repeat(900 * 1024) } }],
      })
      assert.equal(huge.status, 402)
      assert.deepInclude(await huge.json(), { code: 'INSUFFICIENT_CREDITS' })
      assert.lengthOf(upstream.requests, 0)
      assert.equal(await creditsOf(user), 5000 - 14)
    } finally {
      restore()
    }
  })
})
