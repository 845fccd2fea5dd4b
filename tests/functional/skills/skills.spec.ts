import { existsSync } from 'node:fs'
import { readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from '@japa/runner'
import Agent from '#agents/models/agent'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { skillCatalogue } from '#skills/services/skill_catalogue'
import { jwtFor } from '#tests/helpers/identity'
import {
  agentOwners,
  createFixtureAgent,
  foldersOf,
  runtime,
  waitUntilServing,
} from '#tests/helpers/agents_http'

const owners = agentOwners()

function skillFile(agentId: string, skillId: string) {
  return join(foldersOf(agentId).workspace, 'skills', skillId, 'SKILL.md')
}

test.group('Skills: catalogue, install and uninstall', (group) => {
  group.teardown(() => owners.removeAgents())

  test('the catalogue ships at least six AgentSkills skills for both frameworks', ({ assert }) => {
    const skills = [...skillCatalogue().values()]
    assert.isAtLeast(skills.length, 6)
    for (const skill of skills) {
      assert.match(skill.content, new RegExp(`^---\\nname: ${skill.id}\\ndescription: .{20,}`))
      assert.includeMembers(skill.frameworks, ['openclaw', 'hermes'])
    }
    assert.includeMembers(
      skills.map((skill) => skill.id),
      [
        'token-research',
        'wallet-report',
        'web-page-summary',
        'daily-digest',
        'translation',
        'code-review',
      ]
    )
  })

  test('install writes SKILL.md where the framework loads it; the tier limit, 404 and uninstall', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create({ tier: 'free' })
    const agent = await createFixtureAgent(client, owner)
    await waitUntilServing(agent.id)
    const jwt = jwtFor(owner)

    const initial = await client.get(`/agents/${agent.id}/skills`).bearerToken(jwt)
    initial.assertStatus(200)
    assert.deepEqual(initial.body().data.installed, [])
    assert.equal(initial.body().data.tier, 'free')
    assert.equal(initial.body().data.maxSkills, 2)
    assert.includeMembers(initial.body().data.available, ['token-research', 'translation'])

    const installed = await client
      .post(`/agents/${agent.id}/skills/install`)
      .bearerToken(jwt)
      .json({ skillId: 'token-research' })
    installed.assertStatus(200)
    assert.deepEqual(installed.body().data.installed, ['token-research'])
    const written = await readFile(skillFile(agent.id, 'token-research'), 'utf8')
    assert.include(written, 'name: token-research')
    assert.include(written, '# Token research')

    // Installing again changes nothing; a second skill fills the free tier.
    await client
      .post(`/agents/${agent.id}/skills/install`)
      .bearerToken(jwt)
      .json({ skillId: 'token-research' })
    await client
      .post(`/agents/${agent.id}/skills/install`)
      .bearerToken(jwt)
      .json({ skillId: 'translation' })
    const third = await client
      .post(`/agents/${agent.id}/skills/install`)
      .bearerToken(jwt)
      .json({ skillId: 'code-review' })
    third.assertStatus(400)
    assert.equal(third.body().code, 'VALIDATION_ERROR')
    assert.include(third.body().error, '2 skills')
    assert.isFalse(existsSync(skillFile(agent.id, 'code-review')))

    const unknown = await client
      .post(`/agents/${agent.id}/skills/install`)
      .bearerToken(jwt)
      .json({ skillId: 'no-such-skill' })
    unknown.assertStatus(404)
    assert.equal(unknown.body().code, 'NOT_FOUND')

    for (const body of [{}, { skillId: 42 }, { skillId: '../etc' }, { skillId: 'x'.repeat(300) }]) {
      const bad = await client
        .post(`/agents/${agent.id}/skills/install`)
        .bearerToken(jwt)
        .json(body)
      bad.assertStatus(400)
      assert.equal(bad.body().code, 'VALIDATION_ERROR')
    }

    const removed = await client
      .post(`/agents/${agent.id}/skills/uninstall`)
      .bearerToken(jwt)
      .json({ skillId: 'token-research' })
    removed.assertStatus(200)
    assert.deepEqual(removed.body().data.installed, ['translation'])
    assert.isFalse(existsSync(skillFile(agent.id, 'token-research')))
    const again = await client
      .post(`/agents/${agent.id}/skills/uninstall`)
      .bearerToken(jwt)
      .json({ skillId: 'token-research' })
    again.assertStatus(404)

    const stored = await Agent.findOrFail(agent.id)
    assert.deepEqual(stored.installedSkills, ['translation'])

    // Another account's agent: 403.
    const stranger = await owners.create()
    const foreign = await client.get(`/agents/${agent.id}/skills`).bearerToken(jwtFor(stranger))
    foreign.assertStatus(403)
  }).timeout(60_000)

  test('409 on a stopped agent; a sleeping one gets the file now and every start renders it again', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create({ tier: 'pro' })
    const agent = await createFixtureAgent(client, owner)
    await waitUntilServing(agent.id)
    const jwt = jwtFor(owner)

    const stopped = await client.post(`/agents/${agent.id}/stop`).bearerToken(jwt)
    stopped.assertStatus(200)
    const refused = await client
      .post(`/agents/${agent.id}/skills/install`)
      .bearerToken(jwt)
      .json({ skillId: 'daily-digest' })
    refused.assertStatus(409)
    assert.equal(refused.body().code, 'AGENT_NOT_RUNNING')
    assert.isFalse(existsSync(skillFile(agent.id, 'daily-digest')))

    // Asleep: active, but its container is not running.
    await client.post(`/agents/${agent.id}/start`).bearerToken(jwt)
    await waitUntilServing(agent.id)
    const service = await runtime()
    await service.stop(agent.id)
    const sleeping = await Agent.findOrFail(agent.id)
    assert.equal(sleeping.status, 'active')
    const asleep = await client
      .post(`/agents/${agent.id}/skills/install`)
      .bearerToken(jwt)
      .json({ skillId: 'daily-digest' })
    asleep.assertStatus(200)
    assert.include(
      await readFile(skillFile(agent.id, 'daily-digest'), 'utf8'),
      'name: daily-digest'
    )

    // Persisted: the next start writes it again from the stored list.
    await rm(join(foldersOf(agent.id).workspace, 'skills'), { recursive: true, force: true })
    await agentLifecycle.start(await Agent.findOrFail(agent.id))
    await waitUntilServing(agent.id)
    assert.include(await readFile(skillFile(agent.id, 'daily-digest'), 'utf8'), '# Daily digest')
  }).timeout(60_000)
})
