import { test } from '@japa/runner'
import { randomUUID } from 'node:crypto'
import { authCache } from '#identity/services/auth_cache'

function row(id: string, tier = 'free') {
  return { id, tier }
}

test.group('Auth cache', (group) => {
  group.each.setup(({ context }) => {
    if (!authCache.enabled) context.test.skip(true, 'invalidation listener not connected')
  })

  test('stores and returns rows', ({ assert }) => {
    const id = randomUUID()
    authCache.storeUser(row(id), authCache.now())
    assert.deepEqual(authCache.user(id), row(id))
    authCache.forgetUser(id)
    assert.isUndefined(authCache.user(id))
  })

  test('a read that started before an eviction is not stored', async ({ assert }) => {
    const id = randomUUID()
    const startedAt = authCache.now()
    await new Promise((resolve) => setTimeout(resolve, 2))
    authCache.forgetUser(id) // the row changed while the read was in flight
    authCache.storeUser(row(id, 'stale'), startedAt)
    assert.isUndefined(authCache.user(id))

    await new Promise((resolve) => setTimeout(resolve, 2))
    authCache.storeUser(row(id, 'fresh'), authCache.now())
    assert.deepEqual(authCache.user(id), row(id, 'fresh'))
  })

  test('evicting a user drops it; evicting a key drops the key', ({ assert }) => {
    const userId = randomUUID()
    const keyId = randomUUID()
    authCache.storeApiKey({ columns: { id: keyId }, userId }, row(userId), authCache.now())
    assert.deepEqual(authCache.apiKey(keyId), { columns: { id: keyId }, userId })
    authCache.forgetApiKey(keyId)
    assert.isUndefined(authCache.apiKey(keyId))
    assert.deepEqual(authCache.user(userId), row(userId))
  })

  test('a key read that raced an eviction of its user is not stored', async ({ assert }) => {
    const userId = randomUUID()
    const keyId = randomUUID()
    const startedAt = authCache.now()
    await new Promise((resolve) => setTimeout(resolve, 2))
    authCache.forgetUser(userId)
    authCache.storeApiKey({ columns: { id: keyId }, userId }, row(userId), startedAt)
    assert.isUndefined(authCache.apiKey(keyId))
    assert.isUndefined(authCache.user(userId))
  })

  test('a balance announcement updates the cached row in place', ({ assert }) => {
    const id = randomUUID()
    authCache.storeUser({ ...row(id), ai_credits_balance: 100 }, authCache.now())
    authCache.balanceAnnounced(id, 60, `${Date.now()}1`)
    assert.deepEqual(authCache.user(id), { ...row(id), ai_credits_balance: 60 })
  })

  test('a local balance change applies unless its announcement came already', ({ assert }) => {
    const id = randomUUID()
    const [first, second] = [`${Date.now()}2`, `${Date.now()}3`]
    authCache.storeUser({ ...row(id), ai_credits_balance: 100 }, authCache.now())
    authCache.balanceChanged(id, 90, first) // before its announcement
    assert.equal(authCache.user(id)?.ai_credits_balance, 90)
    authCache.balanceAnnounced(id, 90, first)
    // Another commit's announcement overtook this process's own answer:
    authCache.balanceAnnounced(id, 70, second)
    authCache.balanceChanged(id, 90, first)
    assert.equal(authCache.user(id)?.ai_credits_balance, 70)
  })

  test('a read that started before a balance change is not stored', async ({ assert }) => {
    const id = randomUUID()
    const startedAt = authCache.now()
    await new Promise((resolve) => setTimeout(resolve, 2))
    authCache.balanceAnnounced(id, 5, `${Date.now()}4`)
    authCache.storeUser({ ...row(id), ai_credits_balance: 100 }, startedAt)
    assert.isUndefined(authCache.user(id))
  })
})
