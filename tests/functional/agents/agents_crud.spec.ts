import { existsSync } from 'node:fs'
import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { appUrl } from '#config/app'
import Agent from '#agents/models/agent'
import { agentLifecycle } from '#agents/services/agent_lifecycle'
import { agentsForExport } from '#agents/services/agent_service'
import {
  agentForProxyToken,
  agentForWebhookToken,
  webhookTokenOf,
  webhookUrlOf,
} from '#agents/services/agent_tokens'
import { runtimeSpecFor } from '#agents/services/runtime_spec'
import { decryptSecrets } from '#agents/services/config_secrets'
import { apiKeyFor, jwtFor, type CreateUserOptions } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import {
  agentCountOf,
  createFixtureAgent,
  foldersOf,
  runtime,
  statusOf,
  storedConfigOf,
  agentOwners,
} from '#tests/helpers/agents_http'
import { waitFor } from '#tests/helpers/runtime'

const owners = agentOwners({ tier: 'pro' })
const user = (options: CreateUserOptions = {}) => owners.create(options)

const SECRET = 'sk-test-SUPERSECRET-123456'

test.group('Agents: create, read, update, delete', (group) => {
  group.teardown(async () => owners.removeAgents())

  test('POST /agents answers 201 with the agent, secrets masked, and starts its container', async ({
    client,
    assert,
  }) => {
    const owner = await user()
    const response = await client
      .post('/agents')
      .bearerToken(jwtFor(owner))
      .json({
        name: 'Support Bot',
        framework: 'fixture',
        description: 'Answers questions',
        avatarUrl: 'https://example.test/a.png',
        config: {
          personality: 'Friendly',
          apiKey: SECRET,
          channels: { telegram: { botToken: '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALtgsec1' } },
        },
      })
    response.assertStatus(201)
    const agent = response.body().data
    assert.match(agent.id, /^[0-9a-f-]{36}$/)
    assert.match(agent.slug, /^support-bot-[a-z0-9]{6}$/)
    assert.deepInclude(agent, {
      name: 'Support Bot',
      framework: 'fixture',
      status: 'active',
      description: 'Answers questions',
      avatarUrl: 'https://example.test/a.png',
      messageCount: 0,
      integrations: [],
    })
    assert.deepEqual(agent.config, {
      personality: 'Friendly',
      apiKey: '***',
      channels: { telegram: { botToken: '***' } },
    })
    assert.notInclude(response.text(), SECRET)

    // Stored encrypted, never in clear.
    const row = await db.from('agents').where('id', agent.id).first()
    assert.notInclude(JSON.stringify(row), SECRET)
    assert.notInclude(JSON.stringify(row), '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALtgsec1')
    const stored = await Agent.findOrFail(agent.id)
    assert.equal(decryptSecrets(stored.config).apiKey, SECRET)

    // The container starts in the background (the answer did not wait for it).
    const service = await runtime()
    await waitFor('the container to run', () => service.isRunning(agent.id), 20_000)
  })

  test('validation: name 2-50, installed framework, config by the plugin, avatar URL', async ({
    client,
    assert,
  }) => {
    const owner = await user()
    const jwt = jwtFor(owner)
    const cases: [Record<string, unknown>, string][] = [
      [{ name: 'A', framework: 'fixture' }, 'name'],
      [{ name: 'x'.repeat(51), framework: 'fixture' }, 'name'],
      [{ framework: 'fixture' }, 'name'],
      [{ name: 'Okay', framework: 'nope' }, 'framework'],
      [{ name: 'Okay' }, 'framework'],
      [{ name: 'Okay', framework: 'fixture', config: { personality: 42 } }, 'personality'],
      [{ name: 'Okay', framework: 'fixture', config: [1, 2] }, 'config'],
      [{ name: 'Okay', framework: 'openclaw', config: { provider: 'openai' } }, 'apiKey'],
      [{ name: 'Okay', framework: 'fixture', avatarUrl: 'javascript:alert(1)' }, 'avatarUrl'],
      [{ name: 'Okay', framework: 'fixture', config: { big: 'x'.repeat(70_000) } }, 'config'],
    ]
    for (const [body, field] of cases) {
      const response = await client.post('/agents').bearerToken(jwt).json(body)
      assert.equal(response.status(), 400, `${JSON.stringify(body).slice(0, 80)} -> 400`)
      assert.equal(response.body().code, 'VALIDATION_ERROR')
      assert.include(response.body().error, field)
    }
    // Hostile nesting is a 400 (never a stack overflow), on create and on PATCH alike.
    for (const depth of [17, 1000]) {
      const config = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`
      const response = await fetch(`${baseUrl()}/agents`, {
        method: 'POST',
        headers: { 'authorization': `Bearer ${jwt}`, 'content-type': 'application/json' },
        body: `{"name":"Deep","framework":"fixture","config":${config}}`,
      })
      assert.equal(response.status, 400, `depth ${depth}`)
    }
    assert.equal(await agentCountOf(owner), 0)
  })

  test('the tier agent limit answers 400 beyond it (free: 1)', async ({ client, assert }) => {
    const owner = await user({ tier: 'free' })
    await createFixtureAgent(client, owner, { name: 'First' })
    const response = await client
      .post('/agents')
      .bearerToken(jwtFor(owner))
      .json({ name: 'Second', framework: 'fixture' })
    response.assertStatus(400)
    assert.equal(response.body().code, 'VALIDATION_ERROR')
    assert.include(response.body().error, 'limit')
    assert.equal(await agentCountOf(owner), 1)
  })

  test('concurrent creations never exceed the limit (pro: 3)', async ({ client, assert }) => {
    const owner = await user({ tier: 'pro' })
    const jwt = jwtFor(owner)
    const responses = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        client
          .post('/agents')
          .bearerToken(jwt)
          .json({ name: `Racer ${i}`, framework: 'fixture' })
      )
    )
    const statuses = responses.map((response) => response.status()).sort()
    assert.deepEqual(statuses, [201, 201, 201, 400, 400, 400])
    assert.equal(await agentCountOf(owner), 3)
  })

  test('list: newest first, page and limit, total; 400 outside the ranges', async ({
    client,
    assert,
  }) => {
    const owner = await user()
    const jwt = jwtFor(owner)
    const a = await createFixtureAgent(client, owner, { name: 'Alpha' })
    const b = await createFixtureAgent(client, owner, { name: 'Beta' })
    const c = await createFixtureAgent(client, owner, { name: 'Gamma' })

    const all = await client.get('/agents').bearerToken(jwt)
    all.assertStatus(200)
    assert.deepEqual(
      all.body().data.agents.map((agent: { id: string }) => agent.id),
      [c.id, b.id, a.id]
    )
    assert.deepInclude(all.body().data, { total: 3, page: 1, limit: 20 })
    assert.deepEqual(Object.keys(all.body().data.agents[0]).sort(), [
      'createdAt',
      'framework',
      'id',
      'messageCount',
      'name',
      'slug',
      'status',
    ])

    const page2 = await client.get('/agents').qs({ page: 2, limit: 2 }).bearerToken(jwt)
    assert.deepEqual(
      page2.body().data.agents.map((agent: { id: string }) => agent.id),
      [a.id]
    )
    assert.deepInclude(page2.body().data, { total: 3, page: 2, limit: 2 })

    for (const qs of [{ limit: 0 }, { limit: 101 }, { page: 0 }, { page: 'x' }, { limit: 1.5 }]) {
      const response = await client.get('/agents').qs(qs).bearerToken(jwt)
      assert.equal(response.status(), 400, JSON.stringify(qs))
      assert.equal(response.body().code, 'VALIDATION_ERROR')
    }

    // The programmatic API: same list with an API key.
    const key = await apiKeyFor(owner)
    const api = await client.get('/api/v1/agents').qs({ limit: 2 }).bearerToken(key)
    api.assertStatus(200)
    assert.deepInclude(api.body().data, { total: 3, page: 1, limit: 2 })
    assert.lengthOf(api.body().data.agents, 2)
    const badApi = await client.get('/api/v1/agents').qs({ limit: 500 }).bearerToken(key)
    badApi.assertStatus(400)
    // Credentials stay on their surface.
    assert.equal(await statusOf(client.get('/api/v1/agents').bearerToken(jwt)), 401)
    assert.equal(await statusOf(client.get('/agents').bearerToken(key)), 401)
  })

  test('detail, status and v1 detail: owner only (403), unknown and malformed ids 404', async ({
    client,
    assert,
  }) => {
    const owner = await user()
    const stranger = await user()
    const agent = await createFixtureAgent(client, owner, {
      config: { personality: 'Calm', nested: { clientSecret: 'abc-secret' } },
    })

    const detail = await client.get(`/agents/${agent.id}`).bearerToken(jwtFor(owner))
    detail.assertStatus(200)
    assert.deepEqual(detail.body().data.config, {
      personality: 'Calm',
      nested: { clientSecret: '***' },
    })

    const key = await apiKeyFor(owner)
    const v1 = await client.get(`/api/v1/agents/${agent.id}`).bearerToken(key)
    v1.assertStatus(200)
    assert.equal(v1.body().data.config.nested.clientSecret, '***')
    const status = await client.get(`/api/v1/agents/${agent.id}/status`).bearerToken(key)
    status.assertStatus(200)
    // The spec's fields plus the additive boot phase and queue place (docs/runtime.md
    // "Boot phases", "Boot queue order").
    assert.deepEqual(Object.keys(status.body().data).sort(), [
      'container',
      'containerId',
      'messageCount',
      'phase',
      'phaseSince',
      'queuePosition',
      'status',
    ])

    const strangerJwt = jwtFor(stranger)
    const strangerKey = await apiKeyFor(stranger)
    for (const request of [
      client.get(`/agents/${agent.id}`).bearerToken(strangerJwt),
      client.patch(`/agents/${agent.id}`).bearerToken(strangerJwt).json({ name: 'Mine now' }),
      client.delete(`/agents/${agent.id}`).bearerToken(strangerJwt),
      client.post(`/agents/${agent.id}/stop`).bearerToken(strangerJwt),
      client.get(`/agents/${agent.id}/versions`).bearerToken(strangerJwt),
      client.get(`/api/v1/agents/${agent.id}`).bearerToken(strangerKey),
      client.post(`/api/v1/agents/${agent.id}/stop`).bearerToken(strangerKey),
    ]) {
      const response = await request
      assert.equal(response.status(), 403)
      assert.equal(response.body().code, 'FORBIDDEN')
    }
    const unchanged = await Agent.findOrFail(agent.id)
    assert.equal(unchanged.name, 'Fixture Agent')

    const jwt = jwtFor(owner)
    for (const path of [
      '/agents/00000000-0000-4000-8000-000000000000',
      '/agents/not-a-uuid',
      "/agents/1'%20or%201=1",
      '/agents/00000000-0000-4000-8000-000000000000/versions',
      `/agents/${agent.id}/versions/999`,
      `/agents/${agent.id}/versions/abc`,
    ]) {
      const response = await client.get(path).bearerToken(jwt)
      assert.equal(response.status(), 404, path)
      assert.equal(response.body().code, 'NOT_FOUND')
    }
    assert.equal(await statusOf(client.get('/api/v1/agents/nope').bearerToken(key)), 404)
    assert.equal(await statusOf(client.get(`/agents/${agent.id}`)), 401)
  })

  test('by-slug: the owner gets the masked detail, anyone else public fields only', async ({
    client,
    assert,
  }) => {
    const owner = await user()
    const agent = await createFixtureAgent(client, owner, {
      name: 'Public Face',
      description: 'Hello',
      config: { personality: 'Secretive', apiKey: SECRET },
    })
    const publicFields = {
      id: agent.id,
      name: 'Public Face',
      slug: agent.slug,
      description: 'Hello',
      avatarUrl: null,
      framework: 'fixture',
      status: 'active',
    }

    const anonymous = await client.get(`/agents/by-slug/${agent.slug}`)
    anonymous.assertStatus(200)
    assert.deepEqual(anonymous.body().data, publicFields)

    const other = await client
      .get(`/agents/by-slug/${agent.slug}`)
      .bearerToken(jwtFor(await user()))
    assert.deepEqual(other.body().data, publicFields)

    const bad = await client.get(`/agents/by-slug/${agent.slug}`).bearerToken('not-a-jwt')
    assert.deepEqual(bad.body().data, publicFields)

    const mine = await client.get(`/agents/by-slug/${agent.slug}`).bearerToken(jwtFor(owner))
    assert.deepInclude(mine.body().data, publicFields)
    assert.deepEqual(mine.body().data.config, { personality: 'Secretive', apiKey: '***' })
    assert.notInclude(mine.text(), SECRET)

    assert.equal(await statusOf(client.get('/agents/by-slug/no-such-agent-zzzzzz')), 404)
    assert.equal(await statusOf(client.get('/agents/by-slug/BAD%20SLUG')), 404)
  })

  test('PATCH deep-merges config, *** keeps a secret, null removes a key, fields change', async ({
    client,
    assert,
  }) => {
    const owner = await user()
    const jwt = jwtFor(owner)
    const agent = await createFixtureAgent(client, owner, {
      config: {
        personality: 'One',
        apiKey: SECRET,
        tools: { search: { enabled: true, apiKey: 'k2-secret' } },
      },
    })
    const response = await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({
        name: 'Renamed',
        description: null,
        config: {
          personality: 'Two',
          apiKey: '***',
          tools: { search: { enabled: false } },
          extra: 1,
        },
      })
    response.assertStatus(200)
    assert.equal(response.body().data.name, 'Renamed')
    assert.equal(response.body().data.slug, agent.slug)
    assert.isNull(response.body().data.description)
    assert.deepEqual(response.body().data.config, {
      personality: 'Two',
      apiKey: '***',
      tools: { search: { enabled: false, apiKey: '***' } },
      extra: 1,
    })
    let stored = await storedConfigOf(agent.id)
    assert.equal(stored.apiKey, SECRET)
    assert.deepEqual(stored.tools, { search: { enabled: false, apiKey: 'k2-secret' } })

    const second = await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({ config: { extra: null, apiKey: 'sk-new-value-999' } })
    second.assertStatus(200)
    stored = await storedConfigOf(agent.id)
    assert.notProperty(stored, 'extra')
    assert.equal(stored.apiKey, 'sk-new-value-999')

    const invalid = await client
      .patch(`/agents/${agent.id}`)
      .bearerToken(jwt)
      .json({ config: { personality: 5 } })
    invalid.assertStatus(400)
    const shortName = await client.patch(`/agents/${agent.id}`).bearerToken(jwt).json({ name: 'x' })
    shortName.assertStatus(400)
    const renamed = await Agent.findOrFail(agent.id)
    assert.equal(renamed.name, 'Renamed')
  })

  test('DELETE answers at once; the container and its data are removed in the background', async ({
    client,
    assert,
  }) => {
    const owner = await user()
    const jwt = jwtFor(owner)
    const agent = await createFixtureAgent(client, owner)
    const service = await runtime()
    await waitFor('the container to run', () => service.isRunning(agent.id), 20_000)

    const response = await client.delete(`/agents/${agent.id}`).bearerToken(jwt)
    response.assertStatus(200)
    assert.deepEqual(response.body().data, { deleted: true })
    assert.isNull(await Agent.find(agent.id), 'the agent is gone before its container')
    await agentLifecycle.settled()
    const container = await service.status(agent.id)
    assert.equal(container.state, 'absent')
    assert.isFalse(existsSync(foldersOf(agent.id).root), 'its folder is removed')
    assert.equal(await statusOf(client.get(`/agents/${agent.id}`).bearerToken(jwt)), 404)
    assert.equal(await statusOf(client.delete(`/agents/${agent.id}`).bearerToken(jwt)), 404)
  })

  test('tokens: proxy and webhook tokens find their agent; export masks secrets', async ({
    client,
    assert,
  }) => {
    const owner = await user()
    const agent = await createFixtureAgent(client, owner, { config: { apiKey: SECRET } })
    const stored = await Agent.findOrFail(agent.id)
    const spec = runtimeSpecFor(stored)
    assert.match(spec.modelProxy.token, /^apx_[\w-]{43}$/)
    assert.equal(spec.modelProxy.baseUrl, `${appUrl}/v1`)
    assert.deepEqual(spec.config, { apiKey: SECRET })
    const byProxy = await agentForProxyToken(spec.modelProxy.token)
    assert.equal(byProxy?.id, agent.id)
    assert.isNull(await agentForProxyToken(`${spec.modelProxy.token}x`))
    const byWebhook = await agentForWebhookToken(webhookTokenOf(stored))
    assert.equal(byWebhook?.id, agent.id)
    assert.match(webhookUrlOf(stored), /\/webhooks\/in\/whk_[\w-]{43}$/)
    assert.isNull(await agentForWebhookToken(spec.modelProxy.token))

    const exported = await agentsForExport(owner.id)
    assert.lengthOf(exported, 1)
    assert.equal(exported[0].config.apiKey, '***')
    assert.notInclude(JSON.stringify(exported), SECRET)
  })
})
