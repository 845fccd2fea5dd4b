import { hostname } from 'node:os'
import { randomUUID } from 'node:crypto'
import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { INSTANCE_ID } from '#core/jobs/instance'
import { HostCapacityBook } from '#runtime/capacity/host_book'

/** Another instance of this host: live (seen now) or not seen for a minute. */
async function instance(id: string, seenSecondsAgo: number, host = hostname()) {
  await db.table('runtime_instances').insert({
    id,
    host,
    peer_url: 'http://127.0.0.1:1',
    seen_at: new Date(Date.now() - seenSecondsAgo * 1000),
  })
}

/** A start in an instance's queue, asked for `secondsAgo` ago. */
async function queued(
  instanceId: string,
  options: { interactive: boolean; resumes: boolean; secondsAgo: number; host?: string }
) {
  const agentId = randomUUID()
  await db.table('runtime_capacity').insert({
    agent_id: agentId,
    host: options.host ?? hostname(),
    instance: instanceId,
    reserved_mb: 256,
    queued: true,
    interactive: options.interactive,
    resumes: options.resumes,
    arrived_at: new Date(Date.now() - options.secondsAgo * 1000),
  })
  return agentId
}

test.group('Host capacity book: the starts of other instances that go first', (group) => {
  const instances = ['other-live', 'other-stale', `${hostname()}:4194303`, 'elsewhere-live']
  group.each.teardown(async () => {
    await db
      .from('runtime_capacity')
      .whereIn('instance', [...instances, INSTANCE_ID])
      .delete()
    await db.from('runtime_instances').whereIn('id', instances).delete()
  })

  test('counts live instances starts of a higher class, or of its class asked for earlier', async ({
    assert,
  }) => {
    await instance('other-live', 1)
    await instance('other-stale', 60)
    // Seen now, but its process on this host is gone: it counts for nothing.
    await instance(`${hostname()}:4194303`, 1)
    await instance('elsewhere-live', 1, 'another-host')

    const mine = await queued(INSTANCE_ID, { interactive: true, resumes: false, secondsAgo: 5 })
    const ahead = [
      // A higher class (an interactive resume), asked for later.
      await queued('other-live', { interactive: true, resumes: true, secondsAgo: 1 }),
      // Its class, asked for earlier.
      await queued('other-live', { interactive: true, resumes: false, secondsAgo: 9 }),
    ]
    // Its class asked for later; a lower class asked for earlier; an admitted one.
    await queued('other-live', { interactive: true, resumes: false, secondsAgo: 2 })
    await queued('other-live', { interactive: false, resumes: true, secondsAgo: 30 })
    await db
      .from('runtime_capacity')
      .where(
        'agent_id',
        await queued('other-live', { interactive: true, resumes: true, secondsAgo: 30 })
      )
      .update({ queued: false })
    // Instances that do not count, and another host's book.
    await queued('other-stale', { interactive: true, resumes: true, secondsAgo: 30 })
    await queued(`${hostname()}:4194303`, { interactive: true, resumes: true, secondsAgo: 30 })
    await queued('elsewhere-live', {
      interactive: true,
      resumes: true,
      secondsAgo: 30,
      host: 'another-host',
    })

    const book = new HostCapacityBook()
    const entry = { agentId: mine, reservedMb: 256, interactive: true, resumes: false }
    assert.equal(await book.waitingAhead(entry), ahead.length)

    // A background boot of this instance: every live queued start of the other goes first.
    const background = { ...entry, agentId: randomUUID(), interactive: false }
    assert.equal(await book.waitingAhead(background), 4)
  })

  test("an admission names agents to put to sleep for memory even while another instance's boots take every slot", async ({
    assert,
  }) => {
    await instance('other-live', 1)
    const admitted = async (agentId: string, options: { booting: boolean; secondsAgo: number }) =>
      db.table('runtime_capacity').insert({
        agent_id: agentId,
        host: hostname(),
        instance: 'other-live',
        reserved_mb: 300,
        queued: false,
        booting: options.booting,
        last_active_at: new Date(Date.now() - options.secondsAgo * 1000),
      })
    const idleOld = randomUUID()
    const idleRecent = randomUUID()
    await admitted(idleRecent, { booting: false, secondsAgo: 5 })
    await admitted(idleOld, { booting: false, secondsAgo: 50 })
    await admitted(randomUUID(), { booting: true, secondsAgo: 1 })

    const book = new HostCapacityBook()
    const entry = { agentId: randomUUID(), reservedMb: 300, interactive: true, resumes: false }
    const limits = { bootConcurrency: 1, memoryBudgetMb: 900 }
    // Memory short and the one slot booting: the idle agents, least recently active first.
    assert.deepEqual(await book.admit(entry, limits), { victims: [idleOld, idleRecent] })
    // Memory free, the slot still booting: it waits, nobody is put to sleep.
    await db.from('runtime_capacity').where('agent_id', idleOld).delete()
    assert.deepEqual(await book.admit(entry, limits), { victims: [] })
    assert.deepEqual(await book.admit(entry, { ...limits, bootConcurrency: 2 }), {
      admitted: true,
    })
  })
})
