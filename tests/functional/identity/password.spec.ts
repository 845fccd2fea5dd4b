import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { WS_CLOSE } from '#chat/services/chat_socket_server'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners } from '#tests/helpers/agents_http'
import { connectChatSocket } from '#tests/helpers/chat_socket'
import { apiKeyFor, createUser, TEST_PASSWORD } from '#tests/helpers/identity'
import { waitForMail } from '#tests/helpers/mail'
import type { StoredMail } from '#identity/services/file_mail_transport'

const owners = agentOwners()

async function signIn(client: any, email: string, password: string) {
  return client.post('/auth/login').json({ email, password })
}

function resetTokenIn(mail: StoredMail): string {
  const link = /https?:\/\/\S+\/auth\/password\/reset\?token=(\S+)/.exec(mail.text ?? '')
  if (!link) throw new Error('no reset link in the mail')
  return link[1]
}

test.group('Password change and reset', (group) => {
  group.teardown(async () => owners.removeAgents())

  test('change: the current password proves it; old JWTs end; the new password signs in', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const key = await apiKeyFor(user)
    const signedIn = await signIn(client, user.email, TEST_PASSWORD)
    const session = signedIn.body().data
    const wrong = await client
      .post('/auth/password/change')
      .bearerToken(session.token)
      .json({ currentPassword: 'not-the-password', newPassword: 'brand-new-pass-1' })
    wrong.assertStatus(400)
    assert.match(wrong.body().error, /^currentPassword:/)

    const changed = await client
      .post('/auth/password/change')
      .bearerToken(session.token)
      .json({ currentPassword: TEST_PASSWORD, newPassword: 'brand-new-pass-1' })
    changed.assertStatus(200)
    const fresh = changed.body().data.token
    const old = await client.get('/auth/api-keys').bearerToken(session.token)
    old.assertStatus(401)
    const current = await client.get('/auth/api-keys').bearerToken(fresh)
    current.assertStatus(200)
    const oldPassword = await signIn(client, user.email, TEST_PASSWORD)
    oldPassword.assertStatus(401)
    const newPassword = await signIn(client, user.email, 'brand-new-pass-1')
    newPassword.assertStatus(200)
    // A voluntary change keeps the API keys (docs/accounts.md); a reset by mail revokes them.
    const keyAfter = await client.get('/api/v1/me').bearerToken(key)
    keyAfter.assertStatus(200)
  })

  test('reset by mail: neutral answer, a single-use link stored hashed, every session ends', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const signedIn = await signIn(client, user.email, TEST_PASSWORD)
    const session = signedIn.body().data
    const unknown = await client
      .post('/auth/password/forgot')
      .json({ email: 'nobody-here@example.test' })
    const known = await client.post('/auth/password/forgot').json({ email: user.email })
    unknown.assertStatus(200)
    assert.deepEqual(unknown.body(), known.body())

    const mail = await waitForMail(user.email, { subject: /reset/i })
    const token = resetTokenIn(mail)
    const stored = await db.from('password_reset_tokens').where('user_id', user.id)
    assert.lengthOf(stored, 1)
    assert.notEqual(stored[0].token_hash, token, 'stored hashed')

    const reset = await client
      .post('/auth/password/reset')
      .json({ token, password: 'after-reset-pass-2' })
    reset.assertStatus(200)
    const again = await client
      .post('/auth/password/reset')
      .json({ token, password: 'second-try-pass-3' })
    again.assertStatus(400)
    assert.match(again.body().error, /^token:/)

    const old = await client.get('/auth/api-keys').bearerToken(session.token)
    old.assertStatus(401)
    const before = await signIn(client, user.email, TEST_PASSWORD)
    before.assertStatus(401)
    const after = await signIn(client, user.email, 'after-reset-pass-2')
    after.assertStatus(200)
  })

  test('reset by mail revokes every API key: an old key gets 401, an open WebSocket on it closes with 4401', async ({
    client,
    assert,
    cleanup,
  }) => {
    const user = await owners.create()
    const agent = await createAgentFor(user)
    // Made by whoever knew the password before the reset (the thief, maybe).
    const key = await apiKeyFor(user, 'made with a stolen password')
    const before = await client.get('/api/v1/me').bearerToken(key)
    before.assertStatus(200)
    const socket = await connectChatSocket(`/agents/${agent.id}/ws`, { token: key })
    cleanup(() => socket.ws.terminate())

    await client.post('/auth/password/forgot').json({ email: user.email })
    const token = resetTokenIn(await waitForMail(user.email, { subject: /reset/i }))
    const reset = await client
      .post('/auth/password/reset')
      .json({ token, password: 'after-reset-pass-4' })
    reset.assertStatus(200)

    const after = await client.get('/api/v1/me').bearerToken(key)
    after.assertStatus(401)
    assert.equal(after.body().code, 'AUTH_REQUIRED')
    const keys = await db.from('api_keys').where('tokenable_id', user.id)
    assert.lengthOf(keys, 0)
    const closed = await socket.closed
    assert.equal(closed.code, WS_CLOSE.badCredential)

    // The owner signs in with the new password and makes new keys.
    const signedIn = await signIn(client, user.email, 'after-reset-pass-4')
    signedIn.assertStatus(200)
    const fresh = await apiKeyFor(user)
    const works = await client.get('/api/v1/me').bearerToken(fresh)
    works.assertStatus(200)
  }).timeout(30_000)
})
