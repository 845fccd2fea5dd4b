import { test } from '@japa/runner'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import db from '@adonisjs/lucid/services/db'
import { jwtFor } from '#tests/helpers/identity'
import {
  createFixtureAgent,
  runtime,
  statusOf,
  storedConfigOf,
  waitUntilServing,
  agentOwners,
} from '#tests/helpers/agents_http'

const owners = agentOwners({ tier: 'pro' })
const owner = () => owners.create()

const SECRET = 'sk-versions-secret-0001'

test.group('Agents: config versions and snapshots', (group) => {
  group.teardown(async () => owners.removeAgents())

  test('every config change is a version; list with limit/offset; one version masked', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const jwt = jwtFor(user)
    const agent = await createFixtureAgent(client, user, {
      config: { personality: 'v1', apiKey: SECRET },
    })
    await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({ config: { personality: 'v2' }, commitMessage: 'Warmer tone' })
      .then((response) => response.assertStatus(200))
    await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({ config: { personality: 'v3', extra: true } })
      .then((response) => response.assertStatus(200))
    // No config change (name only, or the same values): no version.
    await client.patch(`/agents/${agent.id}`).bearerToken(jwt).json({ name: 'Same config' })
    await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({ config: { personality: 'v3', apiKey: '***' } })

    const list = await client.get(`/agents/${agent.id}/versions`).bearerToken(jwt)
    list.assertStatus(200)
    const versions = list.body().data
    assert.deepEqual(
      versions.map((entry: { version: number; message: string }) => [entry.version, entry.message]),
      [
        [3, 'Changed extra, personality'],
        [2, 'Warmer tone'],
        [1, 'Initial configuration'],
      ]
    )
    assert.deepEqual(Object.keys(versions[0]).sort(), ['createdAt', 'message', 'version'])

    const paged = await client
      .get(`/agents/${agent.id}/versions`)
      .qs({ limit: 1, offset: 1 })
      .bearerToken(jwt)
    assert.deepEqual(
      paged.body().data.map((entry: { version: number }) => entry.version),
      [2]
    )
    for (const qs of [{ limit: 0 }, { limit: 101 }, { offset: -1 }]) {
      assert.equal(
        await statusOf(client.get(`/agents/${agent.id}/versions`).qs(qs).bearerToken(jwt)),
        400
      )
    }

    const one = await client.get(`/agents/${agent.id}/versions/1`).bearerToken(jwt)
    one.assertStatus(200)
    assert.deepInclude(one.body().data, { version: 1, message: 'Initial configuration' })
    assert.deepEqual(one.body().data.config, { personality: 'v1', apiKey: '***' })
    assert.notInclude(one.text(), SECRET)

    // Stored encrypted in the versions too.
    const rows = await db.from('agent_config_versions').where('agent_id', agent.id)
    assert.lengthOf(rows, 3)
    assert.notInclude(JSON.stringify(rows), SECRET)
  })

  test('restoring a version is a new version and restarts the running container with it', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const jwt = jwtFor(user)
    const agent = await createFixtureAgent(client, user, {
      config: { personality: 'Original soul', apiKey: SECRET },
    })
    await waitUntilServing(agent.id)
    const service = await runtime()
    const { containerId: firstContainer } = await service.status(agent.id)

    await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({ config: { personality: 'Changed soul', apiKey: 'sk-changed-key-0002' } })
      .then((response) => response.assertStatus(200))

    // The PATCH reconfigures the running container in the background (the
    // new run's id is reported from the moment it is scheduled): new container, new SOUL.md.
    await agentLifecycle.settled()
    await waitUntilServing(agent.id)
    const { containerId: secondContainer } = await service.status(agent.id)
    assert.notEqual(secondContainer, firstContainer)
    const soulAfterPatch = await client
      .get(`/agents/${agent.id}/container-files/read`)
      .qs({ path: 'SOUL.md' })
      .bearerToken(jwt)
    assert.equal(soulAfterPatch.body().data.content, 'Changed soul')

    const restored = await client.post(`/agents/${agent.id}/versions/1/restore`).bearerToken(jwt)
    restored.assertStatus(200)
    assert.deepInclude(restored.body().data, { id: agent.id, version: 3, restoredFrom: 1 })
    assert.deepEqual(restored.body().data.config, { personality: 'Original soul', apiKey: '***' })
    const config = await storedConfigOf(agent.id)
    assert.equal(config.apiKey, SECRET)

    const versions = await client.get(`/agents/${agent.id}/versions`).bearerToken(jwt)
    assert.equal(versions.body().data[0].message, 'Restored version 1')

    await agentLifecycle.settled()
    await waitUntilServing(agent.id)
    const { containerId: thirdContainer } = await service.status(agent.id)
    assert.notEqual(thirdContainer, secondContainer)
    const soul = await client
      .get(`/agents/${agent.id}/container-files/read`)
      .qs({ path: 'SOUL.md' })
      .bearerToken(jwt)
    assert.equal(soul.body().data.content, 'Original soul')

    assert.equal(
      await statusOf(client.post(`/agents/${agent.id}/versions/42/restore`).bearerToken(jwt)),
      404
    )
  })

  test('snapshots: the list is the data array; restoring one sets that config', async ({
    client,
    assert,
  }) => {
    const user = await owner()
    const jwt = jwtFor(user)
    const agent = await createFixtureAgent(client, user, { config: { personality: 'first' } })
    await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({ config: { personality: 'second' } })

    const list = await client.get(`/agents/${agent.id}/config-snapshots`).bearerToken(jwt)
    list.assertStatus(200)
    const snapshots = list.body().data
    assert.isArray(snapshots)
    assert.lengthOf(snapshots, 2)
    assert.deepEqual(Object.keys(snapshots[0]).sort(), ['createdAt', 'id', 'message', 'version'])
    const first = snapshots.find((entry: { version: number }) => entry.version === 1)

    const restored = await client
      .post(`/agents/${agent.id}/config-snapshots/${first.id}/restore`)
      .bearerToken(jwt)
    restored.assertStatus(200)
    assert.equal(restored.body().data.config.personality, 'first')
    const after = await client.get(`/agents/${agent.id}/config-snapshots`).bearerToken(jwt)
    assert.lengthOf(after.body().data, 3)
    assert.equal(after.body().data[0].message, 'Restored version 1')

    // Unknown, malformed and foreign snapshot ids.
    const other = await createFixtureAgent(client, user, { name: 'Other' })
    const otherSnapshots = await client.get(`/agents/${other.id}/config-snapshots`).bearerToken(jwt)
    for (const snapshotId of [
      '00000000-0000-4000-8000-000000000000',
      'nope',
      otherSnapshots.body().data[0].id,
    ]) {
      assert.equal(
        await statusOf(
          client.post(`/agents/${agent.id}/config-snapshots/${snapshotId}/restore`).bearerToken(jwt)
        ),
        404
      )
    }
    const stranger = await owner()
    assert.equal(
      await statusOf(
        client.get(`/agents/${agent.id}/config-snapshots`).bearerToken(jwtFor(stranger))
      ),
      403
    )
  })
})
