import { test } from '@japa/runner'
import { jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import { agentOwners, createFixtureAgent, waitUntilServing } from '#tests/helpers/agents_http'
import { downloadArchive, uploadArchive } from '#tests/helpers/agent_archives'
import { startServiceUnderFault, type ServiceUnderFault } from '#tests/helpers/service_under_fault'

/**
 * Migration between installations (issue 29, item 4): an archive made by
 * the test run's service imports on a second service with its own
 * PostgreSQL, storage and APP_KEY, and the agent there serves the files.
 */
test.group('Agent migration between installations', (group) => {
  const owners = agentOwners({ tier: 'pro', credits: 1000 })
  let other: ServiceUnderFault | undefined
  group.teardown(async () => {
    await owners.removeAgents()
    await other?.destroy()
  })

  test('an archive made here imports on another service and its agent runs there', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create()
    const jwt = jwtFor(owner)
    const agent = await createFixtureAgent(client, owner, {
      config: { personality: 'Travels well', apiKey: 'sk-stays-home' },
    })
    await waitUntilServing(agent.id)
    await client
      .put(`/agents/${agent.id}/container-files`)
      .bearerToken(jwt)
      .json({ path: 'journey/log.txt', content: 'packed on the first install' })
      .then((answer) => answer.assertStatus(200))
    const made = await client.post(`/agents/${agent.id}/backups`).bearerToken(jwt).json({})
    made.assertStatus(201)
    const archive = await downloadArchive(
      baseUrl(),
      jwt,
      `/agents/${agent.id}/backups/${made.body().data.id}/download`
    )
    assert.equal(archive.status, 200)

    // A backup with encrypted secrets is this install's only.
    const withSecrets = await client
      .post(`/agents/${agent.id}/backups`)
      .bearerToken(jwt)
      .json({ includeSecrets: true })
    withSecrets.assertStatus(201)
    const secretArchive = await downloadArchive(
      baseUrl(),
      jwt,
      `/agents/${agent.id}/backups/${withSecrets.body().data.id}/download`
    )

    other = await startServiceUnderFault({ LOG_LEVEL: 'warn' })
    const token = await other.signUp()
    const refused = await uploadArchive(other.server.url, token, secretArchive.bytes)
    assert.equal(refused.status, 400)
    assert.match(refused.body.error, /another installation/)

    const imported = await uploadArchive(other.server.url, token, archive.bytes)
    assert.equal(imported.status, 201, JSON.stringify(imported.body))
    const moved = imported.body.data
    assert.equal(moved.name, agent.name)
    assert.equal(moved.framework, 'fixture')
    assert.equal(moved.config.personality, 'Travels well')
    assert.notProperty(moved.config, 'apiKey')
    await other.waitUntilRunning(token, moved.id, 60_000)
    const read = await other.call(
      `/agents/${moved.id}/container-files/read?path=${encodeURIComponent('journey/log.txt')}`,
      { token }
    )
    assert.equal(read.status, 200)
    assert.equal(read.body.data.content, 'packed on the first install')
    const list = await other.call('/agents', { token })
    assert.equal(list.body.data.total, 1)
  }).timeout(300_000)
})
