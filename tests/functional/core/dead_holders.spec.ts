import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { hostname } from 'node:os'
import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { claimFreeRows } from '#channels/services/channel_rows'
import { claimJobLease } from '#core/jobs/periodic_jobs'
import { claimLease, leaseHolder } from '#runtime/services/runtime_lease'
import { runDueSchedules } from '#schedules/services/schedule_service'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { createUser } from '#tests/helpers/identity'

/**
 * Claims and leases in PostgreSQL record their holder (host, pid, start):
 * one whose holder provably died (same host, pid gone) is taken over at
 * once, not after its expiry; a live holder's is left alone.
 */
async function deadHolder(): Promise<string> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
  await once(child, 'exit')
  return `${hostname()}:${child.pid}:gone`
}

test.group('Claims of a dead holder are taken over at once', (group) => {
  let living: ChildProcess
  group.setup(() => {
    living = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 600000)'], { stdio: 'ignore' })
    return () => {
      living.kill('SIGKILL')
    }
  })

  test('a schedule claimed for 10 minutes by a killed instance runs at the next tick', async ({
    assert,
  }) => {
    const owner = await createUser({ credits: 1000 })
    const agent = await createAgentFor(owner)
    const claimedUntil = new Date(Date.now() + 10 * 60_000)
    const insert = (name: string, claimedBy: string) =>
      db
        .table('agent_schedules')
        .insert({
          agent_id: agent.id,
          name,
          cron: '@hourly',
          timezone: 'UTC',
          message: name,
          next_run_at: new Date(Date.now() - 1000),
          claimed_by: claimedBy,
          claimed_until: claimedUntil,
        })
        .returning('id')
    const [dead] = await insert('Dead holder', await deadHolder())
    const [alive] = await insert('Live holder', `${hostname()}:${living.pid}:alive`)

    await runDueSchedules(new Date(), 'instance-next')
    const runs = await db.from('agent_schedule_runs').whereIn('schedule_id', [dead.id, alive.id])
    assert.deepEqual(
      runs.map((run) => run.schedule_id),
      [dead.id],
      'only the dead holder’s task was taken over'
    )
  })

  test('a runtime lease of a killed instance is taken at once; a live holder keeps its own', async ({
    assert,
  }) => {
    const name = `test-lease-${Date.now()}`
    assert.isTrue(await claimLease(name, await deadHolder(), 60 * 60_000))
    assert.isTrue(await claimLease(name, 'instance-next', 20_000), 'dead holder: taken over')
    assert.equal(await leaseHolder(name), 'instance-next')

    const other = `test-lease-live-${Date.now()}`
    assert.isTrue(await claimLease(other, `${hostname()}:${living.pid}:alive`, 60 * 60_000))
    assert.isFalse(await claimLease(other, 'instance-next', 20_000), 'live holder: left alone')
    await db.from('runtime_leases').whereIn('name', [name, other]).delete()
  })

  test('a periodic job lease of a killed instance is taken at once; a live holder keeps its own', async ({
    assert,
  }) => {
    const name = `test-job-${Date.now()}`
    assert.isTrue(await claimJobLease(name, await deadHolder(), 60 * 60_000))
    assert.isTrue(await claimJobLease(name, 'instance-next'), 'dead holder: taken over')
    const row = await db.from('periodic_job_leases').where('name', name).firstOrFail()
    assert.equal(row.holder, 'instance-next')

    const other = `test-job-live-${Date.now()}`
    assert.isTrue(await claimJobLease(other, `${hostname()}:${living.pid}:alive`, 60 * 60_000))
    assert.isFalse(await claimJobLease(other, 'instance-next'), 'live holder: left alone')
    await db.from('periodic_job_leases').whereIn('name', [name, other]).delete()
  })

  test('a channel connection lease of a killed instance is taken at once; a live holder keeps its own', async ({
    assert,
  }) => {
    const owner = await createUser()
    const agent = await createAgentFor(owner)
    const leasedUntil = new Date(Date.now() + 60 * 60_000)
    const insert = async (channel: string, holder: string) => {
      const [row] = await db
        .table('agent_channels')
        .insert({
          agent_id: agent.id,
          channel,
          fingerprint: channel,
          state: 'connected',
          holder,
          lease_expires_at: leasedUntil,
        })
        .returning('id')
      return row.id as string
    }
    const dead = await insert('telegram', await deadHolder())
    const alive = await insert('discord', `${hostname()}:${living.pid}:alive`)
    try {
      const claimed = await claimFreeRows('instance-next', 1000)
      const ours = claimed.map((row) => row.id).filter((id) => [dead, alive].includes(id))
      assert.deepEqual(ours, [dead], 'only the dead holder’s connection was taken over')
      const rows = await db.from('agent_channels').whereIn('id', [dead, alive])
      const holderOf = (id: string) => rows.find((row) => row.id === id)?.holder
      assert.equal(holderOf(dead), 'instance-next')
      assert.equal(holderOf(alive), `${hostname()}:${living.pid}:alive`)
    } finally {
      // Other files' rows this claim may have picked up go back to free.
      await db
        .from('agent_channels')
        .where('holder', 'instance-next')
        .update({ holder: null, lease_expires_at: null })
      await db.from('agent_channels').whereIn('id', [dead, alive]).delete()
    }
  })
})
