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
})
