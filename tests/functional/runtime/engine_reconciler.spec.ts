import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { EngineReconciler, RECONCILE_LEASE } from '#runtime/services/engine_reconciler'
import { claimLease, leaseHolder } from '#runtime/services/runtime_lease'
import { waitFor } from '#tests/helpers/runtime'

/**
 * Two service instances on one engine: their reconcilers race for one
 * PostgreSQL lease. What each reconcile pass does is recorded per instance.
 */
test.group('Runtime / engine reconciler lease', (group) => {
  const reconcilers: EngineReconciler[] = []
  group.each.setup(async () => {
    await db.from('runtime_leases').delete()
  })
  group.each.teardown(async () => {
    await Promise.all(reconcilers.splice(0).map((reconciler) => reconciler.stop()))
    await db.from('runtime_leases').delete()
  })

  function instance(holder: string, passes: string[], leaseMs = 20_000) {
    const reconciler = new EngineReconciler({
      holder,
      leaseMs,
      tickMs: 100,
      reconcileEveryMs: 60_000,
      reconcile: async () => {
        passes.push(holder)
      },
    })
    reconcilers.push(reconciler)
    return reconciler
  }

  test('claims are exclusive: of many racing claims exactly one wins; the holder renews', async ({
    assert,
  }) => {
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, index) => claimLease('race', `instance-${index}`, 10_000))
    )
    assert.lengthOf(
      results.filter((won) => won),
      1
    )
    const holder = await leaseHolder('race')
    assert.isTrue(await claimLease('race', holder!, 10_000), 'the holder renews')
    assert.isFalse(await claimLease('race', 'someone-else', 10_000))
  })

  test('one instance reconciles; when it dies, the other takes over and reconciles at once', async ({
    assert,
  }) => {
    const passes: string[] = []
    const first = instance('instance-a', passes, 1500)
    await first.tick()
    const second = instance('instance-b', passes, 1500)
    await second.tick()
    assert.deepEqual(passes, ['instance-a'], 'only the holder reconciles')
    assert.isTrue(first.holding)
    assert.isFalse(second.holding)

    // Both keep ticking; only the holder keeps the lease.
    first.start()
    second.start()
    await new Promise((resolve) => setTimeout(resolve, 2500))
    assert.equal(await leaseHolder(RECONCILE_LEASE), 'instance-a')
    assert.deepEqual(passes, ['instance-a'], 'no second pass before it is due, none by the other')

    // instance-a dies (stops renewing, releases nothing): its lease lapses and b takes over.
    await first.stop()
    await waitFor('the takeover', () => second.holding, 10_000)
    assert.equal(await leaseHolder(RECONCILE_LEASE), 'instance-b')
    assert.deepEqual(passes, ['instance-a', 'instance-b'])
  })

  test('a clean shutdown releases the lease, so the next instance takes over on its next tick', async ({
    assert,
  }) => {
    const passes: string[] = []
    const first = instance('instance-a', passes)
    await first.tick()
    await first.stop({ release: true })
    const second = instance('instance-b', passes)
    await second.tick()
    assert.isTrue(second.holding)
    assert.deepEqual(passes, ['instance-a', 'instance-b'])
  })
})
