import { existsSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from '@japa/runner'
import { agentCapacityConfig } from '#config/agent_capacity'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import Agent from '#agents/models/agent'
import {
  agentOwners,
  foldersOf,
  runtime,
  servingFixtureAgent,
  waitUntilServing,
} from '#tests/helpers/agents_http'

const owners = agentOwners()
const KB = 1024

/**
 * AGENT_WORKSPACE_QUOTA_MB: the file manager refuses writes past it, and an
 * agent that filled its workspace itself is put to sleep and kept asleep
 * until its owner deletes enough.
 */
test.group('Agents: workspace quota', (group) => {
  let quotaMb: number
  group.setup(() => {
    quotaMb = agentCapacityConfig.workspaceQuotaMb
    agentCapacityConfig.workspaceQuotaMb = 1
    return async () => {
      agentCapacityConfig.workspaceQuotaMb = quotaMb
      await owners.removeAgents()
    }
  })

  test('a write past the quota answers 413 and stores nothing; after a delete it goes through', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create({ tier: 'pro' })
    const { agent, jwt } = await servingFixtureAgent(client, owner)
    const files = `/agents/${agent.id}/container-files`
    const write = (path: string) =>
      client
        .put(files)
        .bearerToken(jwt)
        .json({ path, content: 'x'.repeat(600 * KB) })

    const first = await write('first.txt')
    first.assertStatus(200)
    const refused = await write('second.txt')
    refused.assertStatus(413)
    assert.equal(refused.body().code, 'VALIDATION_ERROR')
    assert.match(refused.body().error, /quota of 1 MB/)
    assert.isFalse(existsSync(join(foldersOf(agent.id).workspace, 'second.txt')))

    const removed = await client.delete(files).qs({ path: 'first.txt' }).bearerToken(jwt)
    removed.assertStatus(200)
    const second = await write('second.txt')
    second.assertStatus(200)
  })

  test('an agent that fills its own workspace is put to sleep and starts again only once files are deleted', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create({ tier: 'pro' })
    const { agent, jwt } = await servingFixtureAgent(client, owner)
    const service = await runtime()
    // What the agent's own tools would do: write into its workspace folder.
    await writeFile(join(foldersOf(agent.id).workspace, 'dump.bin'), Buffer.alloc(1200 * KB, 7))

    assert.include(await agentLifecycle.sleepOverQuota(), agent.id)
    assert.isFalse(await service.isRunning(agent.id))
    const status = await client.get(`/agents/${agent.id}/status`).bearerToken(jwt)
    assert.equal(status.body().data.container, 'sleeping')

    // A message does not wake it (the hosted path answers meanwhile); a start is refused.
    await agentLifecycle.wake(await Agent.findOrFail(agent.id))
    await agentLifecycle.settled()
    assert.isFalse(await service.isRunning(agent.id))
    const started = await client.post(`/agents/${agent.id}/start`).bearerToken(jwt)
    started.assertStatus(400)
    assert.match(started.body().error, /over its quota/)
    const stored = await Agent.findOrFail(agent.id)
    assert.equal(stored.status, 'active', 'still an active (sleeping) agent, not failed')

    // Files of the sleeping agent are managed without waking it.
    const removed = await client
      .delete(`/agents/${agent.id}/container-files`)
      .qs({ path: 'dump.bin' })
      .bearerToken(jwt)
    removed.assertStatus(200)
    const restarted = await client.post(`/agents/${agent.id}/start`).bearerToken(jwt)
    restarted.assertStatus(200)
    await waitUntilServing(agent.id)
  })
})
