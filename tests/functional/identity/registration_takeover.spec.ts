import { test } from '@japa/runner'
import { uniqueEmail, uniqueUsername } from '#tests/helpers/identity'
import { linkIn, waitForMail } from '#tests/helpers/mail'

const ATTACKER_PASSWORD = 'attacker-chose-this-1'
const OWNER_PASSWORD = 'the-real-owner-pass-2'

/**
 * Pre-registration takeover (issue 17): someone registers an address that
 * is not theirs and never verifies it; the owner registers and verifies.
 * The verified account must answer to the owner's password only.
 */
test.group('Registration: an unverified registration cannot take over an address', () => {
  test("the owner's verification sets the owner's password, also when the other party registers again meanwhile", async ({
    client,
    assert,
  }) => {
    const email = uniqueEmail('victim')
    const register = async (password: string) => {
      const answer = await client
        .post('/auth/register')
        .json({ email, username: uniqueUsername('r'), password })
      answer.assertStatus(200)
    }
    const login = (password: string) => client.post('/auth/login').json({ email, password })

    await register(ATTACKER_PASSWORD)
    await waitForMail(email, { subject: /verify/i, count: 1 })
    await register(OWNER_PASSWORD)
    const ownersMail = await waitForMail(email, { subject: /verify/i, count: 2 })
    // The other party registers once more before the owner clicks.
    await register(ATTACKER_PASSWORD)
    await waitForMail(email, { subject: /verify/i, count: 3 })

    const verified = await client.get(linkIn(ownersMail, '/auth/verify-email/').pathname)
    assert.isBelow(verified.status(), 400)

    const attacker = await login(ATTACKER_PASSWORD)
    attacker.assertStatus(401)
    const owner = await login(OWNER_PASSWORD)
    owner.assertStatus(200)
  }).timeout(30_000)
})
