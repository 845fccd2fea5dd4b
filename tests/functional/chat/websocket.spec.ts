import { test } from '@japa/runner'
import type { ApiClient } from '@japa/api-client'
import type User from '#identity/models/user'
import db from '@adonisjs/lucid/services/db'
import WebSocket from 'ws'
import { chatConfig } from '#config/chat'
import { chatSocketServer, WS_CLOSE } from '#chat/services/chat_socket_server'
import quotaService from '#identity/services/quota_service'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners } from '#tests/helpers/agents_http'
import {
  apiKeyFor,
  createUser,
  jwtFor,
  TEST_PASSWORD,
  type CreateUserOptions,
} from '#tests/helpers/identity'
import { ConsoleVisitor } from '#tests/helpers/console'
import { JWT_TTL_SECONDS, signJwt } from '#identity/services/jwt'
import { chatOver as chat, connectChatSocket as connect, wsUrl } from '#tests/helpers/chat_socket'
import { answersWritten } from '#tests/helpers/answers_written'

interface Session {
  token: string
  refreshToken: string
}

const owners = agentOwners({ tier: 'pro', credits: 100 })
const owner = (options: CreateUserOptions = {}) => owners.create(options)

test.group('WebSocket /agents/:id/ws', (group) => {
  group.teardown(async () => owners.removeAgents())
  group.each.setup(() => {
    const interval = chatConfig.websocket.pingIntervalMs
    return () => chatSocketServer.setPingInterval(interval)
  })

  test('API key in Authorization: chat -> chat_response; stored; counted against the daily quota', async ({
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const before = await quotaService.peek(user)
    const client = await connect(`/agents/${agent.id}/ws`, { token: await apiKeyFor(user) })
    const reply = await chat(client, 'Hello over WebSocket')
    assert.equal(reply.type, 'chat_response')
    assert.deepEqual(Object.keys(reply.payload), ['content'])
    assert.include(reply.payload.content, 'Hello over WebSocket')

    const second = await chat(client, 'And again')
    assert.equal(second.type, 'chat_response')
    const after = await quotaService.peek(user)
    assert.equal(after.used - before.used, 2)

    await answersWritten()
    const stored = await db.from('chat_messages').where('agent_id', agent.id)
    assert.lengthOf(stored, 4)
    client.ws.close()
  })

  test('a JWT works too (and does not count against the API quota)', async ({ assert }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const before = await quotaService.peek(user)
    const client = await connect(`/agents/${agent.id}/ws`, { token: jwtFor(user) })
    const reply = await chat(client, 'JWT hello')
    assert.equal(reply.type, 'chat_response')
    const after = await quotaService.peek(user)
    assert.equal(after.used, before.used)
    client.ws.close()
  })

  test('browsers: the bearer.<token> subprotocol authenticates and is echoed back', async ({
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const protocol = `bearer.${await apiKeyFor(user)}`
    const client = await connect(`/agents/${agent.id}/ws`, { protocols: [protocol] })
    assert.equal(client.ws.protocol, protocol)
    const reply = await chat(client, 'from a browser')
    assert.equal(reply.type, 'chat_response')
    client.ws.close()
  })

  test('bad JSON, unknown types and invalid messages get an error message; the socket stays open', async ({
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const client = await connect(`/agents/${agent.id}/ws`, { token: jwtFor(user) })

    client.ws.send('{not json')
    const notJson = await client.next()
    assert.equal(notJson.type, 'error')
    client.ws.send(JSON.stringify({ type: 'dance', payload: {} }))
    const unknown = await client.next()
    assert.equal(unknown.type, 'error')
    assert.equal(unknown.payload.code, 'VALIDATION_ERROR')
    assert.include(unknown.payload.message, 'dance')

    const empty = await chat(client, '')
    assert.equal(empty.type, 'error')
    assert.equal(empty.payload.code, 'VALIDATION_ERROR')
    const blocked = await chat(client, chatConfig.blockedPhrases[0])
    assert.deepEqual(blocked.payload.code, 'CONTENT_BLOCKED')

    client.ws.send(JSON.stringify({ type: 'ping' }))
    assert.deepEqual(await client.next(), { type: 'pong' })
    const reply = await chat(client, 'still here?')
    assert.equal(reply.type, 'chat_response')
    assert.equal(client.ws.readyState, WebSocket.OPEN)
    client.ws.close()
  })

  test('close codes: 4401 missing or bad credential, 4403 foreign agent, 4404 unknown agent', async ({
    assert,
  }) => {
    const user = await owner()
    const stranger = await owner()
    const agent = await createAgentFor(user)
    const cases: [string, { token?: string; protocols?: string[] }, number][] = [
      [`/agents/${agent.id}/ws`, {}, WS_CLOSE.badCredential],
      [`/agents/${agent.id}/ws`, { token: 'hk_bogus.key' }, WS_CLOSE.badCredential],
      [`/agents/${agent.id}/ws`, { token: 'not-a-jwt' }, WS_CLOSE.badCredential],
      [`/agents/${agent.id}/ws`, { protocols: ['bearer.wrong'] }, WS_CLOSE.badCredential],
      [`/agents/${agent.id}/ws`, { token: jwtFor(stranger) }, WS_CLOSE.forbidden],
      [`/agents/${agent.id}/ws`, { token: await apiKeyFor(stranger) }, WS_CLOSE.forbidden],
      [`/agents/6f1c4a7e-0000-4000-8000-000000000000/ws`, { token: jwtFor(user) }, 4404],
      [`/agents/not-an-id/ws`, { token: jwtFor(user) }, 4404],
    ]
    for (const [path, options, code] of cases) {
      const client = await connect(path, options)
      const closed = await client.closed
      assert.equal(closed.code, code, `${path} ${JSON.stringify(Object.keys(options))}`)
    }
    assert.deepEqual(WS_CLOSE, {
      badCredential: 4401,
      forbidden: 4403,
      unknownAgent: 4404,
      tooManySockets: 4429,
      tooManyQueued: 1008,
    })
  })

  test('other upgrade paths are refused with 404', async ({ assert }) => {
    const ws = new WebSocket(wsUrl('/not/a/socket'))
    const error = await new Promise<Error>((resolve) => ws.once('error', resolve))
    assert.include(error.message, '404')
  })

  test('past the daily limit an API-key chat message gets RATE_LIMIT_EXCEEDED; the socket stays open', async ({
    assert,
  }) => {
    const user = await owner({ tier: 'free' })
    const agent = await createAgentFor(user)
    const key = await apiKeyFor(user)
    const client = await connect(`/agents/${agent.id}/ws`, { token: key })
    const { remaining } = await quotaService.peek(user)
    for (let i = 0; i < remaining - 1; i++) await quotaService.consume(user)

    const last = await chat(client, 'the last one today')
    assert.equal(last.type, 'chat_response')
    const refused = await chat(client, 'one too many')
    assert.equal(refused.type, 'error')
    assert.equal(refused.payload.code, 'RATE_LIMIT_EXCEEDED')
    assert.equal(client.ws.readyState, WebSocket.OPEN)
    client.ws.close()
  })

  test('a hosted chat without credits gets INSUFFICIENT_CREDITS as an error message', async ({
    assert,
  }) => {
    const user = await owner({ credits: 0 })
    const agent = await createAgentFor(user)
    const client = await connect(`/agents/${agent.id}/ws`, { token: jwtFor(user) })
    const reply = await chat(client, 'hi')
    assert.deepEqual(reply, {
      type: 'error',
      payload: { code: 'INSUFFICIENT_CREDITS', message: 'Not enough AI Credits for this request' },
    })
    client.ws.close()
  })

  test('keepalive: the server pings; a client that never answers is dropped', async ({
    assert,
  }) => {
    chatSocketServer.setPingInterval(100)
    const user = await owner()
    const agent = await createAgentFor(user)
    const polite = await connect(`/agents/${agent.id}/ws`, { token: jwtFor(user) })
    const silent = await connect(`/agents/${agent.id}/ws`, { token: jwtFor(user), autoPong: false })
    let pings = 0
    polite.ws.on('ping', () => pings++)

    const dropped = await silent.closed
    assert.equal(dropped.code, 1006)
    assert.isAtLeast(pings, 1)
    assert.equal(polite.ws.readyState, WebSocket.OPEN)
    polite.ws.close()
  })
})

test.group('WebSocket limits and revocation', (group) => {
  group.teardown(async () => owners.removeAgents())

  test('a socket closes with 4401 within seconds of its API key being revoked', async ({
    assert,
    client,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const key = await apiKeyFor(user)
    const socket = await connect(`/agents/${agent.id}/ws`, { token: key })
    const keys = await client.get('/auth/api-keys').bearerToken(jwtFor(user))
    for (const entry of keys.body().data.apiKeys) {
      await client.delete(`/auth/api-keys/${entry.id}`).bearerToken(jwtFor(user))
    }
    const closed = await socket.closed
    assert.equal(closed.code, WS_CLOSE.badCredential)
    assert.match(closed.reason, /revoked or has expired/)
  }).timeout(20_000)

  /**
   * A JWT socket outlives nothing its JWT does not: every way a dashboard
   * session ends (sign-out, staff disabling the account, a password change)
   * closes the sockets it opened.
   */
  test('a socket opened with a JWT closes with 4401 after {how}')
    .with([
      {
        how: 'the account signs out',
        end: async (client: ApiClient, session: Session) => {
          const out = await client.post('/auth/logout').json({ refreshToken: session.refreshToken })
          out.assertStatus(200)
        },
      },
      {
        how: 'staff disable the account',
        end: async (_client: ApiClient, _session: Session, user: User) => {
          const visitor = await ConsoleVisitor.signedIn(await createUser({ role: 'admin' }))
          await visitor.get(`/console/accounts/${user.id}`)
          const disabled = await visitor.post(`/console/accounts/${user.id}/disable`)
          if (disabled.status !== 302) throw new Error(`disable answered ${disabled.status}`)
        },
      },
      {
        how: 'a password change',
        end: async (client: ApiClient, session: Session) => {
          const changed = await client
            .post('/auth/password/change')
            .bearerToken(session.token)
            .json({ currentPassword: TEST_PASSWORD, newPassword: 'changed-after-socket-1' })
          changed.assertStatus(200)
        },
      },
    ])
    .run(async ({ assert, client, cleanup }, row) => {
      const user = await owner()
      const agent = await createAgentFor(user)
      const login = await client
        .post('/auth/login')
        .json({ email: user.email, password: TEST_PASSWORD })
      login.assertStatus(200)
      const session: Session = login.body().data
      const socket = await connect(`/agents/${agent.id}/ws`, { token: session.token })
      cleanup(() => socket.ws.terminate())
      const open = await client.get('/auth/api-keys').bearerToken(session.token)
      open.assertStatus(200)

      await row.end(client, session, user)

      const closed = await socket.closed
      assert.equal(closed.code, WS_CLOSE.badCredential)
      const after = await client.get('/auth/api-keys').bearerToken(session.token)
      after.assertStatus(401)
    })
    .timeout(30_000)

  test('a socket opened with a JWT closes with 4401 once the JWT expires', async ({
    assert,
    cleanup,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    // Issued just under 7 days ago: valid when the socket opens, expired 2 s later.
    const issued = new Date(Date.now() - (JWT_TTL_SECONDS - 2) * 1000)
    const { token } = signJwt(user.id, { now: issued, version: user.tokenVersion ?? 0 })
    const socket = await connect(`/agents/${agent.id}/ws`, { token })
    cleanup(() => socket.ws.terminate())
    const closed = await socket.closed
    assert.equal(closed.code, WS_CLOSE.badCredential)
  }).timeout(30_000)

  test('open sockets per account are capped: one more is closed with 4429', async ({ assert }) => {
    const previous = chatConfig.websocket.maxSocketsPerAccount
    chatConfig.websocket.maxSocketsPerAccount = 2
    try {
      const user = await owner()
      const agent = await createAgentFor(user)
      const token = jwtFor(user)
      const first = await connect(`/agents/${agent.id}/ws`, { token })
      const second = await connect(`/agents/${agent.id}/ws`, { token })
      const third = await connect(`/agents/${agent.id}/ws`, { token })
      const refused = await third.closed
      assert.equal(refused.code, WS_CLOSE.tooManySockets)
      first.ws.close()
      await first.closed
      const again = await connect(`/agents/${agent.id}/ws`, { token })
      assert.equal(again.ws.readyState, again.ws.OPEN, 'a freed place can be used again')
      second.ws.close()
      again.ws.close()
    } finally {
      chatConfig.websocket.maxSocketsPerAccount = previous
    }
  })

  test('a chat message holding NUL gets VALIDATION_ERROR and nothing is stored', async ({
    assert,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const socket = await connect(`/agents/${agent.id}/ws`, { token: jwtFor(user) })
    const refused = await chat(socket, 'a\u0000b')
    assert.equal(refused.type, 'error')
    assert.equal(refused.payload.code, 'VALIDATION_ERROR')
    assert.include(refused.payload.message, 'payload.message')
    const surrogate = await chat(socket, 'a\ud800b')
    assert.equal(surrogate.payload.code, 'VALIDATION_ERROR')
    await answersWritten()
    const stored = await db.from('chat_messages').where('agent_id', agent.id)
    assert.lengthOf(stored, 0)
    const ok = await chat(socket, 'clean\ttext')
    assert.equal(ok.type, 'chat_response', 'the socket stays usable; tab is free text')
    socket.ws.close()
  })

  test('a frame over the 64 KiB limit closes the socket with 1009, unread', async ({
    assert,
    cleanup,
  }) => {
    const user = await owner()
    const agent = await createAgentFor(user)
    const socket = await connect(`/agents/${agent.id}/ws`, { token: jwtFor(user) })
    cleanup(() => socket.ws.terminate())
    const message = 'x'.repeat(chatConfig.websocket.maxPayloadBytes)
    socket.ws.send(JSON.stringify({ type: 'chat', payload: { message } }))
    const closed = await socket.closed
    assert.equal(closed.code, 1009)
    await answersWritten()
    const stored = await db.from('chat_messages').where('agent_id', agent.id)
    assert.lengthOf(stored, 0)
  })

  test('a client sending faster than it is answered is closed with 1008, not buffered', async ({
    assert,
  }) => {
    const previous = chatConfig.websocket.maxQueuedMessages
    chatConfig.websocket.maxQueuedMessages = 2
    try {
      const user = await owner()
      const agent = await createAgentFor(user)
      const socket = await connect(`/agents/${agent.id}/ws`, { token: jwtFor(user) })
      const frame = JSON.stringify({ type: 'chat', payload: { message: 'flood' } })
      for (let i = 0; i < 20; i++) socket.ws.send(frame)
      const closed = await socket.closed
      assert.equal(closed.code, WS_CLOSE.tooManyQueued)
    } finally {
      chatConfig.websocket.maxQueuedMessages = previous
    }
  })
})
