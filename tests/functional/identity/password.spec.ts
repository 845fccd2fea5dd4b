import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { createUser, TEST_PASSWORD } from '#tests/helpers/identity'
import { waitForMail } from '#tests/helpers/mail'
import type { StoredMail } from '#identity/services/file_mail_transport'

async function signIn(client: any, email: string, password: string) {
  return client.post('/auth/login').json({ email, password })
}

function resetTokenIn(mail: StoredMail): string {
  const link = /https?:\/\/\S+\/auth\/password\/reset\?token=(\S+)/.exec(mail.text ?? '')
  if (!link) throw new Error('no reset link in the mail')
  return link[1]
}

test.group('Password change and reset', () => {
  test('change: the current password proves it; old JWTs end; the new password signs in', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
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
})
