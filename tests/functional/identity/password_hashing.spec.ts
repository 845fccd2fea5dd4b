import { test } from '@japa/runner'
import { Scrypt } from '@adonisjs/core/hash/drivers/scrypt'
import hash from '@adonisjs/core/services/hash'
import db from '@adonisjs/lucid/services/db'
import { DEFAULT_PASSWORD_HASH_COST } from '#config/hash'
import { hashingLimits } from '#identity/services/password_hashing'
import { createUser, TEST_PASSWORD } from '#tests/helpers/identity'

/** The `n=` parameter of a PHC scrypt hash. */
function costOf(phc: string): number {
  return Number(/n=(\d+)/.exec(phc)?.[1])
}

test.group('Password hashing: cost, rehash on sign-in, bounded queue', () => {
  test("without PASSWORD_HASH_COST, scrypt runs at OWASP's cost (N=2^17, r=8, p=1), not 2^14", ({
    assert,
  }) => {
    // The test run lowers it (bin/test.ts) only to stay fast; a hash made at any other cost
    // is redone at the configured one (next test).
    assert.equal(DEFAULT_PASSWORD_HASH_COST, 131_072)
  })

  test('a hash made at an older cost is redone at the configured cost when its owner signs in', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const old = await new Scrypt({ cost: 1024, blockSize: 8, parallelization: 1 }).make(
      TEST_PASSWORD
    )
    await db.from('users').where('id', user.id).update({ password: old })
    assert.isTrue(hash.needsReHash(old))

    const wrong = await client
      .post('/auth/login')
      .json({ email: user.email, password: 'nope-nope-1' })
    wrong.assertStatus(401)
    const [unchanged] = await db.from('users').where('id', user.id).select('password')
    assert.equal(unchanged.password, old, 'a wrong password changes nothing')

    const login = await client
      .post('/auth/login')
      .json({ email: user.email, password: TEST_PASSWORD })
    login.assertStatus(200)
    const [row] = await db.from('users').where('id', user.id).select('password')
    assert.notEqual(row.password, old)
    assert.equal(costOf(row.password), Number(process.env.PASSWORD_HASH_COST))
    assert.isFalse(hash.needsReHash(row.password))
    assert.isTrue(await hash.verify(row.password, TEST_PASSWORD))

    const again = await client
      .post('/auth/login')
      .json({ email: user.email, password: TEST_PASSWORD })
    again.assertStatus(200)
  })

  test('beyond the waiting limit a sign-in gets 503 with Retry-After, never a pile-up', async ({
    client,
    assert,
  }) => {
    const user = await createUser()
    const saved = { ...hashingLimits }
    hashingLimits.concurrent = 1
    hashingLimits.waiting = 1
    try {
      const answers = await Promise.all(
        Array.from({ length: 8 }, () =>
          client.post('/auth/login').json({ email: user.email, password: TEST_PASSWORD })
        )
      )
      const statuses = answers.map((answer) => answer.status())
      assert.includeMembers(statuses, [200, 503], String(statuses))
      assert.isTrue(statuses.every((status) => status === 200 || status === 503))
      const busy = answers.find((answer) => answer.status() === 503)!
      assert.equal(busy.body().code, 'SERVER_ERROR')
      assert.equal(busy.header('retry-after'), '2')
    } finally {
      Object.assign(hashingLimits, saved)
    }
  })
})
