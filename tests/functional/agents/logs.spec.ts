import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { agentUid, bubblewrapWorks } from '#runtime/process/sandbox'
import { createInterface } from 'node:readline'
import { test } from '@japa/runner'
import { issueLogStreamToken } from '#agents/services/log_stream_tokens'
import { apiKeyFor, jwtFor } from '#tests/helpers/identity'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { baseUrl } from '#tests/helpers/http'
import { asAgentOnHost, waitFor } from '#tests/helpers/runtime'
import { STREAM_LIMITS } from '#core/http/stream_slots'
import {
  callFixture,
  chatWithContainer,
  createFixtureAgent,
  statusOf,
  waitUntilServing,
  agentOwners,
  foldersOf,
  runtime,
} from '#tests/helpers/agents_http'

const owners = agentOwners({ tier: 'pro', credits: 10_000 })
const owner = () => owners.create()
const limitOwners = agentOwners({ tier: 'pro' })

const SECRET = 'sk-logs-secret-777777'

/** Reads `data:` lines of an SSE response until `until` matches one (or the timeout). */
async function readSseUntil(
  response: Response,
  until: (data: string) => boolean,
  timeoutMs = 10_000
): Promise<string[]> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  const seen: string[] = []
  let buffer = ''
  const deadline = Date.now() + timeoutMs
  try {
    while (Date.now() < deadline) {
      const chunk = await Promise.race([
        reader.read(),
        new Promise<never>((_, reject) =>
          setTimeout(
            () => reject(new Error(`no SSE line matched; saw ${JSON.stringify(seen)}`)),
            deadline - Date.now()
          )
        ),
      ])
      if (chunk.done) break
      buffer += chunk.value
      let end
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const event = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        for (const line of event.split('\n')) {
          if (!line.startsWith('data: ')) continue
          const data = line.slice(6)
          seen.push(data)
          if (until(data)) return seen
        }
      }
    }
  } finally {
    await reader.cancel().catch(() => {})
  }
  throw new Error(`the stream ended; saw ${JSON.stringify(seen)}`)
}

/**
 * A browser-style EventSource (Node's built-in, undici's implementation)
 * in a child process: it cannot send headers, so it uses the logs token.
 * Prints `open`, then one JSON line per message.
 */
function eventSourceClient(url: string) {
  const script = `
    const source = new EventSource(process.argv[1])
    source.onopen = () => console.log('open')
    source.onmessage = (event) => console.log(JSON.stringify(event.data))
    source.onerror = () => { console.log('error'); process.exit(2) }
  `
  const child = spawn(
    process.execPath,
    ['--experimental-eventsource', '--no-warnings', '-e', script, url],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    }
  )
  const lines = createInterface({ input: child.stdout! })
  const received: string[] = []
  const waiters: Array<() => void> = []
  lines.on('line', (line) => {
    received.push(line)
    for (const wake of waiters.splice(0)) wake()
  })
  return {
    received,
    async waitFor(check: (line: string) => boolean, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs
      while (!received.some(check)) {
        if (Date.now() > deadline || child.exitCode !== null) {
          throw new Error(`EventSource saw ${JSON.stringify(received)}`)
        }
        await new Promise<void>((resolve) => {
          waiters.push(resolve)
          setTimeout(resolve, 200)
        })
      }
    },
    close() {
      child.kill()
    },
  }
}

test.group('Agents: logs (tail, live SSE, logs tokens)', (group) => {
  group.teardown(async () => owners.removeAgents())

  test('tail: plain text, default 100 lines, `tail` lines, secrets as ***', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const jwt = jwtFor(user)
    const agent = await createFixtureAgent(client, user, { config: { apiKey: SECRET } })
    await waitUntilServing(agent.id)
    await callFixture(agent.id, '/log?lines=150&text=bulk')
    await chatWithContainer(agent.id, `my key is ${SECRET}`)

    const response = await client.get(`/agents/${agent.id}/logs`).bearerToken(jwt)
    response.assertStatus(200)
    assert.match(response.header('content-type') ?? '', /^text\/plain/)
    const lines = response.text().split('\n')
    assert.lengthOf(lines, 100)
    assert.include(response.text(), 'bulk 149')
    assert.include(response.text(), 'my key is ***')
    assert.notInclude(response.text(), SECRET)

    const five = await client.get(`/agents/${agent.id}/logs`).qs({ tail: 5 }).bearerToken(jwt)
    assert.lengthOf(five.text().split('\n'), 5)
    assert.include(five.text(), 'message=my key is ***')

    for (const tail of [-1, 'abc', 10_001, 2.5]) {
      const bad = await client.get(`/agents/${agent.id}/logs`).qs({ tail }).bearerToken(jwt)
      assert.equal(bad.status(), 400, String(tail))
      assert.equal(bad.body().code, 'VALIDATION_ERROR')
    }
  })

  test('an old layout whose runtime/output.log the agent linked to a root-only file: GET logs never returns it (issue 25)', async ({
    client,
    assert,
  }) => {
    const outside = await mkdtemp(join(tmpdir(), 'logs-canary-'))
    try {
      const canary = join(outside, 'app_key')
      const canaryText = `canary-${randomBytes(12).toString('hex')}`
      await writeFile(canary, canaryText, { mode: 0o600 })
      assert.equal(await readFile(canary, 'utf8'), canaryText, 'root reads it')

      const user = await owner()
      const jwt = jwtFor(user)
      const agent = await createFixtureAgent(client, user)
      await waitUntilServing(agent.id)
      const stopped = await client.post(`/agents/${agent.id}/stop`).bearerToken(jwt)
      stopped.assertStatus(200)

      // The layout before: the agent owned its folder, the service's runtime/ in it.
      const folders = foldersOf(agent.id)
      const uid = agentUid(agent.id)
      await chown(folders.root, uid, uid)
      await chmod(folders.root, 0o700)
      await mkdir(join(folders.root, 'runtime'), { mode: 0o700 })
      asAgentOnHost(
        agent.id,
        folders.root,
        `mv runtime runtime.orig && mkdir runtime && ln -s ${canary} runtime/output.log`
      )
      assert.equal(await readFile(join(folders.root, 'runtime', 'output.log'), 'utf8'), canaryText)

      const started = await client.post(`/agents/${agent.id}/start`).bearerToken(jwt)
      started.assertStatus(200)
      await waitUntilServing(agent.id)
      await callFixture(agent.id, '/log?text=after-the-upgrade')
      const five = await client.get(`/agents/${agent.id}/logs`).qs({ tail: 5 }).bearerToken(jwt)
      five.assertStatus(200)
      assert.include(five.text(), 'after-the-upgrade')
      assert.notInclude(five.text(), canaryText)
    } finally {
      await rm(outside, { recursive: true, force: true })
    }
  })
    .timeout(60_000)
    .skip(process.getuid?.() !== 0 || !bubblewrapWorks(), 'needs root and bubblewrap')

  test('stream=true: live lines over SSE with the JWT', async ({ client, assert }) => {
    const user = await owner()
    const agent = await createFixtureAgent(client, user, { config: { apiKey: SECRET } })
    await waitUntilServing(agent.id)
    await callFixture(agent.id, '/log?text=before-stream')

    const controller = new AbortController()
    const response = await fetch(`${baseUrl()}/agents/${agent.id}/logs?stream=true&tail=1`, {
      headers: { authorization: `Bearer ${jwtFor(user)}` },
      signal: controller.signal,
    })
    assert.equal(response.status, 200)
    assert.match(response.headers.get('content-type')!, /^text\/event-stream/)
    assert.equal(response.headers.get('x-accel-buffering'), 'no')

    // Lines written after the stream opened arrive live, secrets masked.
    const writer = (async () => {
      await new Promise((resolve) => setTimeout(resolve, 300))
      await callFixture(agent.id, '/log?lines=3&text=live-line')
      await chatWithContainer(agent.id, `streamed ${SECRET}`)
    })()
    const seen = await readSseUntil(response, (data) => data.includes('message=streamed'))
    await writer
    controller.abort()
    assert.isTrue(
      seen.some((data) => data.includes('before-stream 0')),
      'the tail line'
    )
    assert.isTrue(seen.some((data) => data.includes('live-line 2')))
    assert.isTrue(seen.some((data) => data.includes('message=streamed ***')))
    assert.notInclude(seen.join('\n'), SECRET)
  })

  test('stream=true on a sleeping agent: its stored tail, then live lines once it wakes; 409 once stopped', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const jwt = jwtFor(user)
    const agent = await createFixtureAgent(client, user)
    await waitUntilServing(agent.id)
    await callFixture(agent.id, '/log?text=before-sleep')
    await agentLifecycle.sleep(agent.id)
    await agentLifecycle.settled()
    await agentLifecycle.eventsStored()
    const service = await runtime()
    assert.isFalse(await service.isRunning(agent.id), 'asleep')

    const openStream = (signal: AbortSignal) =>
      fetch(`${baseUrl()}/agents/${agent.id}/logs?stream=true&tail=20`, {
        headers: { authorization: `Bearer ${jwt}` },
        signal,
      })
    const controller = new AbortController()
    const response = await openStream(controller.signal)
    assert.equal(response.status, 200, 'an active agent asleep is no 409')
    const waker = (async () => {
      const chat = await client
        .post(`/api/v1/agents/${agent.id}/chat`)
        .bearerToken(await apiKeyFor(user))
        .json({ message: 'wake up' })
      chat.assertStatus(200)
      await waitUntilServing(agent.id)
      await callFixture(agent.id, '/log?text=after-wake')
    })()
    const seen = await readSseUntil(response, (data) => data.includes('after-wake'), 40_000)
    await waker
    controller.abort()
    assert.isTrue(
      seen.some((data) => data.includes('before-sleep')),
      'the stored tail came first'
    )

    const stop = await client.post(`/agents/${agent.id}/stop`).bearerToken(jwt)
    stop.assertStatus(200)
    const stopped = await openStream(new AbortController().signal)
    assert.equal(stopped.status, 409)
    assert.equal(((await stopped.json()) as any).code, 'AGENT_NOT_RUNNING')
  }).timeout(60_000)

  test('an EventSource client streams with a short-lived logs token', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const jwt = jwtFor(user)
    const agent = await createFixtureAgent(client, user)
    await waitUntilServing(agent.id)

    const issued = await client.post(`/agents/${agent.id}/logs/token`).bearerToken(jwt)
    issued.assertStatus(200)
    const { token, expiresIn, streamUrl } = issued.body().data
    assert.match(token, /^lgt_/)
    assert.equal(expiresIn, 300)
    assert.equal(
      streamUrl,
      `/agents/${agent.id}/logs?stream=true&token=${encodeURIComponent(token)}`
    )

    const source = eventSourceClient(`${baseUrl()}${streamUrl}&tail=0`)
    try {
      await source.waitFor((line) => line === 'open')
      await callFixture(agent.id, '/log?lines=3&text=es-line')
      await source.waitFor((line) => line.includes('es-line 2'))
      assert.isTrue(source.received.some((line) => line.includes('es-line 0')))
    } finally {
      source.close()
    }

    // The same token also reads the plain tail.
    const tail = await client.get(`/agents/${agent.id}/logs`).qs({ token, tail: 3 })
    tail.assertStatus(200)
    assert.include(tail.text(), 'es-line 2')
  })

  test('logs access: no credential 401, bad or foreign tokens 401, other owners 403', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const stranger = await owner()
    const agent = await createFixtureAgent(client, user)
    const other = await createFixtureAgent(client, user, { name: 'Other' })
    const logs = `/agents/${agent.id}/logs`

    assert.equal(await statusOf(client.get(logs)), 401)
    assert.equal(await statusOf(client.get(logs).qs({ token: 'lgt_nope.nope' })), 401)
    const otherToken = issueLogStreamToken(other.id, user.id).token
    assert.equal(await statusOf(client.get(logs).qs({ token: otherToken })), 401)
    const expired = issueLogStreamToken(agent.id, user.id, new Date(Date.now() - 301_000)).token
    assert.equal(await statusOf(client.get(logs).qs({ token: expired })), 401)
    const wrongOwner = issueLogStreamToken(agent.id, stranger.id).token
    assert.equal(await statusOf(client.get(logs).qs({ token: wrongOwner })), 403)
    assert.equal(await statusOf(client.get(logs).bearerToken(jwtFor(stranger))), 403)
    assert.equal(
      await statusOf(client.post(`/agents/${agent.id}/logs/token`).bearerToken(jwtFor(stranger))),
      403
    )
    const valid = issueLogStreamToken(agent.id, user.id).token
    assert.equal(await statusOf(client.get(logs).qs({ token: valid })), 200)
  })
})

test.group('Logs: limits', (group) => {
  group.teardown(() => limitOwners.removeAgents())

  test('live log streams per account are capped (429 with Retry-After); tail is at most 1,000 lines', async ({
    client,
    assert,
  }) => {
    const user = await limitOwners.create()
    const agent = await createFixtureAgent(client, user)
    await waitUntilServing(agent.id)
    const open = (signal: AbortSignal) =>
      fetch(`${baseUrl()}/agents/${agent.id}/logs?stream=true&tail=0`, {
        headers: { authorization: `Bearer ${jwtFor(user)}` },
        signal,
      })
    const controllers = Array.from({ length: STREAM_LIMITS.logs }, () => new AbortController())
    const streams = await Promise.all(controllers.map((controller) => open(controller.signal)))
    for (const stream of streams) assert.equal(stream.status, 200)

    const extra = await open(new AbortController().signal)
    assert.equal(extra.status, 429)
    assert.equal(extra.headers.get('retry-after'), '5')
    assert.equal(((await extra.json()) as any).code, 'RATE_LIMIT_EXCEEDED')

    controllers[0].abort()
    const freed = new AbortController()
    const again = await waitFor(
      'a freed stream slot',
      async () => {
        const answer = await open(freed.signal)
        if (answer.status === 200) return true
        await answer.body?.cancel()
        return false
      },
      5_000
    )
    assert.isTrue(again)
    freed.abort()
    for (const controller of controllers) controller.abort()

    const long = await client
      .get(`/agents/${agent.id}/logs`)
      .qs({ tail: 5000 })
      .bearerToken(jwtFor(user))
    long.assertStatus(400)
  }).timeout(30_000)
})
