import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { cacheClear, cacheGet, cacheSet, cached, purgeExpired } from '#core/cache/shared_cache'

/** The shared cache without REDIS_URL: the PostgreSQL table every instance reads. */
test.group('Shared cache (PostgreSQL)', (group) => {
  group.each.setup(() => cacheClear('test:'))

  test('a value is kept for its lifetime, by the database clock', async ({ assert }) => {
    await cacheSet('test:a', { n: 1, s: 'x' }, 30)
    assert.deepEqual(await cacheGet('test:a'), { n: 1, s: 'x' })
    const [row] = await db
      .rawQuery(
        `select extract(epoch from expires_at - now()) as left from shared_cache where key = 'test:a'`
      )
      .then((result) => result.rows)
    assert.isAbove(Number(row.left), 0)
    assert.isAtMost(Number(row.left), 30)
  })

  test('an expired value is a miss, and the purge removes it', async ({ assert }) => {
    await cacheSet('test:old', 'stale', 30)
    await db
      .from('shared_cache')
      .where('key', 'test:old')
      .update({ expires_at: db.raw(`now() - interval '1 second'`) })
    assert.isUndefined(await cacheGet('test:old'))
    assert.isAtLeast(await purgeExpired(), 1)
    const left = await db.from('shared_cache').where('key', 'test:old')
    assert.lengthOf(left, 0)
  })

  test('concurrent misses compute once; a failure is not cached', async ({ assert }) => {
    let computed = 0
    const compute = async () => {
      computed++
      return { at: computed }
    }
    const answers = await Promise.all([
      cached('test:once', 30, compute),
      cached('test:once', 30, compute),
    ])
    assert.equal(computed, 1)
    assert.deepEqual(answers, [{ at: 1 }, { at: 1 }])
    assert.deepEqual(await cached('test:once', 30, compute), { at: 1 }, 'from the cache')

    await assert.rejects(() =>
      cached('test:fails', 30, async () => {
        throw new Error('upstream down')
      })
    )
    assert.isUndefined(await cacheGet('test:fails'))
  })
})
