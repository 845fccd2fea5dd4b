import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import {
  claimJobLease,
  lockKeyFor,
  runJobExclusively,
  type PeriodicJob,
} from '#core/jobs/periodic_jobs'

function gatedJob(name: string) {
  let release!: () => void
  const gate = new Promise<void>((resolve) => (release = resolve))
  const job: PeriodicJob & { runs: number } = {
    name: `${name}-${Date.now()}-${Math.random().toString(36).slice(2)}`,
    everyMs: 60_000,
    runs: 0,
    run: async () => {
      job.runs++
      await gate
    },
  }
  return { job, release }
}

test.group('Periodic jobs', () => {
  test('two instances ticking together run a job once', async ({ assert }) => {
    const { job, release } = gatedJob('two-instances')
    const first = runJobExclusively(job, 'instance-a')
    // Give the first run time to claim its lease before the second tries.
    await new Promise((resolve) => setTimeout(resolve, 100))
    const second = await runJobExclusively(job, 'instance-b')
    // The same instance never overlaps its own run either.
    const again = await runJobExclusively(job, 'instance-a')
    release()

    assert.isFalse(second)
    assert.isFalse(again)
    assert.isTrue(await first)
    assert.equal(job.runs, 1)
    // Once the first run is over, the lease is free for anyone.
    assert.isTrue(await runJobExclusively(job, 'instance-b'))
    assert.equal(job.runs, 2)
  })

  test('the lease of a holder that died is taken over once it expires', async ({ assert }) => {
    const name = `dead-holder-${Date.now()}`
    assert.isTrue(await claimJobLease(name, 'dead-instance', 200))
    assert.isFalse(await claimJobLease(name, 'live-instance'))
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.isTrue(await claimJobLease(name, 'live-instance'))
    const row = await db.from('periodic_job_leases').where('name', name).firstOrFail()
    assert.equal(row.holder, 'live-instance')
  })

  test('jobs running at once hold no connection: more jobs than the pool still finish', async ({
    assert,
  }) => {
    // Each job waits, then queries: with one held connection per run this
    // deadlocked once the jobs outnumbered the pool.
    const jobs = Array.from({ length: 30 }, (_, i) => gatedJob(`pool-${i}`))
    for (const { job } of jobs) {
      const inner = job.run
      job.run = async () => {
        await inner()
        await db.rawQuery('select pg_sleep(0.05)')
      }
    }
    const runs = jobs.map(({ job }) => runJobExclusively(job))
    await new Promise((resolve) => setTimeout(resolve, 300))
    for (const { release } of jobs) release()
    const results = await Promise.all(runs)
    assert.isTrue(results.every(Boolean))
  }).timeout(20_000)

  test('lock keys are stable and distinct per job', async ({ assert }) => {
    assert.equal(lockKeyFor('lapse'), lockKeyFor('lapse'))
    assert.notEqual(lockKeyFor('lapse'), lockKeyFor('prune-history'))
  })
})
