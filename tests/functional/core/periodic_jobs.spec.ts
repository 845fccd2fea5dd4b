import { test } from '@japa/runner'
import { runJobExclusively, lockKeyFor, type PeriodicJob } from '#core/jobs/periodic_jobs'

test.group('Periodic jobs', () => {
  test('two instances ticking together run a job once', async ({ assert }) => {
    let runs = 0
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const job: PeriodicJob = {
      name: `test-job-${Date.now()}`,
      everyMs: 60_000,
      run: async () => {
        runs++
        await gate
      },
    }

    const first = runJobExclusively(job)
    // Give the first run time to take its lock before the second tries.
    await new Promise((resolve) => setTimeout(resolve, 100))
    const second = await runJobExclusively(job)
    release()

    assert.isFalse(second)
    assert.isTrue(await first)
    assert.equal(runs, 1)
    // Once the first run is over, the lock is free again.
    assert.isTrue(await runJobExclusively(job))
    assert.equal(runs, 2)
  })

  test('lock keys are stable and distinct per job', async ({ assert }) => {
    assert.equal(lockKeyFor('lapse'), lockKeyFor('lapse'))
    assert.notEqual(lockKeyFor('lapse'), lockKeyFor('prune-history'))
  })
})
