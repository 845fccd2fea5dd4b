import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import type { Assert } from '@japa/assert'
import type { ApiClient } from '@japa/api-client'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners, foldersOf, putToSleep, servingFixtureAgent } from '#tests/helpers/agents_http'
import { apiKeyFor, createUser, jwtFor } from '#tests/helpers/identity'
import {
  startModelUpstream,
  useProviderEndpoints,
  useUpstream,
  type ModelUpstream,
} from '#tests/helpers/model_upstream'

const FACT = 'The launch code of Project Zephyr is 7-4-1-9, kept by Captain Ilse Marwick.'
const UNRELATED = 'Pancakes need flour, milk and two eggs; rest the batter for ten minutes.'

/** The agent's `knowledge/<filename>` workspace copy on disk, or null when absent. */
async function mirrored(agentId: string, filename: string): Promise<string | null> {
  try {
    return await readFile(join(foldersOf(agentId).workspace, 'knowledge', filename), 'utf8')
  } catch {
    return null
  }
}

/** Uploads the fact and the unrelated document to the agent (both must be stored). */
async function uploadFactAndUnrelated(client: ApiClient, agentId: string, jwt: string) {
  for (const [filename, content] of [
    ['zephyr.txt', `Mission log.\n\n${FACT}`],
    ['recipes.txt', UNRELATED],
  ]) {
    const uploaded = await client
      .post(`/agents/${agentId}/knowledge`)
      .bearerToken(jwt)
      .json({ filename, content })
    uploaded.assertStatus(201)
  }
}

/** A system message with the agent's personality and the fact's passage, not the unrelated one. */
function assertFactOnly(assert: Assert, system: { role: string; content: string }) {
  assert.equal(system.role, 'system')
  assert.include(system.content, 'You are a ship computer.')
  assert.include(system.content, '7-4-1-9')
  assert.notInclude(system.content, 'Pancakes')
}

async function owner() {
  const user = await createUser({ credits: 100_000 })
  const agent = await createAgentFor(user, { config: { personality: 'You are a ship computer.' } })
  return { user, agent, jwt: jwtFor(user) }
}

test.group('Knowledge: files', () => {
  test('upload, list, replace by filename, delete; sizes in UTF-8 bytes', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await owner()
    const upload = (filename: string, content: string) =>
      client.post(`/agents/${agent.id}/knowledge`).bearerToken(jwt).json({ filename, content })
    const first = await upload('notes.txt', 'héllo')
    first.assertStatus(201)
    assert.equal(first.body().data.size, 6, 'é is two bytes')
    await upload('notes.txt', 'replaced')
    const list = await client.get(`/agents/${agent.id}/knowledge`).bearerToken(jwt)
    assert.deepEqual(
      list.body().data.map((f: any) => [f.filename, f.size]),
      [['notes.txt', 8]]
    )
    const deleted = await client.delete(`/agents/${agent.id}/knowledge/notes.txt`).bearerToken(jwt)
    assert.deepEqual(deleted.body().data, { deleted: 'notes.txt' })
    const missing = await client.delete(`/agents/${agent.id}/knowledge/notes.txt`).bearerToken(jwt)
    missing.assertStatus(404)
  })

  test('stores exactly the bytes sent: surrounding whitespace and line endings kept, size of what was sent', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await owner()
    // 67 UTF-8 bytes (issue 26: was listed as 66, the final newline trimmed away).
    const content = '  Indented first line, ok\r\nSecond line with a tick \u2713\n\tTabbed end\n'
    assert.equal(Buffer.byteLength(content, 'utf8'), 67)
    const upload = await client
      .post(`/agents/${agent.id}/knowledge`)
      .bearerToken(jwt)
      .json({ filename: 'exact.txt', content })
    upload.assertStatus(201)
    assert.equal(upload.body().data.size, 67)
    const list = await client.get(`/agents/${agent.id}/knowledge`).bearerToken(jwt)
    assert.deepInclude(list.body().data[0], { filename: 'exact.txt', size: 67 })
    const stored = await db
      .from('knowledge_files')
      .where({ agent_id: agent.id, filename: 'exact.txt' })
      .first()
    assert.equal(stored.content, content)
    const copy = await mirrored(agent.id, 'exact.txt')
    if (copy !== null) assert.equal(copy, content)
  })

  test('over 500 KB, a path or an over-long name are 400', async ({ client, assert }) => {
    const { agent, jwt } = await owner()
    const upload = (filename: string, content: string) =>
      client.post(`/agents/${agent.id}/knowledge`).bearerToken(jwt).json({ filename, content })
    const big = await upload('big.txt', 'é'.repeat(256 * 1024))
    big.assertStatus(400)
    assert.match(big.body().error, /^content:/)
    for (const name of ['../etc/passwd', 'a/b.txt', 'x'.repeat(256)]) {
      const answer = await upload(name, 'text')
      answer.assertStatus(400)
    }
  })

  test("past the tier's total per agent (free: 1 MB) an upload is 400 naming the limit", async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await owner()
    const upload = (filename: string, content: string) =>
      client.post(`/agents/${agent.id}/knowledge`).bearerToken(jwt).json({ filename, content })
    const part = 'k'.repeat(400 * 1024)
    await upload('one.txt', part).then((answer) => answer.assertStatus(201))
    await upload('two.txt', part).then((answer) => answer.assertStatus(201))
    // Replacing a file counts its new size only.
    await upload('two.txt', part).then((answer) => answer.assertStatus(201))
    const over = await upload('three.txt', part)
    over.assertStatus(400)
    assert.equal(over.body().code, 'VALIDATION_ERROR')
    assert.match(over.body().error, /Free plan allows 1 MB of knowledge per agent/)
    const list = await client.get(`/agents/${agent.id}/knowledge`).bearerToken(jwt)
    assert.deepEqual(
      list.body().data.map((f: any) => f.filename),
      ['one.txt', 'two.txt'],
      'nothing stored beyond the limit'
    )
  })
})

test.group('Knowledge: the workspace copy', (group) => {
  const owners = agentOwners()
  group.teardown(() => owners.removeAgents())

  test('mirrored into knowledge/ of a running agent, and of a sleeping one without waking it', async ({
    client,
    assert,
  }) => {
    const { agent, jwt } = await servingFixtureAgent(client, await owners.create())
    const upload = (filename: string, content: string) =>
      client.post(`/agents/${agent.id}/knowledge`).bearerToken(jwt).json({ filename, content })
    await upload('awake.txt', 'written while running').then((answer) => answer.assertStatus(201))
    assert.equal(await mirrored(agent.id, 'awake.txt'), 'written while running')

    const service = await putToSleep(agent.id)
    assert.isFalse(await service.isRunning(agent.id))
    await upload('asleep.txt', 'written while asleep').then((answer) => answer.assertStatus(201))
    assert.equal(await mirrored(agent.id, 'asleep.txt'), 'written while asleep')
    const removed = await client.delete(`/agents/${agent.id}/knowledge/awake.txt`).bearerToken(jwt)
    removed.assertStatus(200)
    assert.isNull(await mirrored(agent.id, 'awake.txt'), 'the copy goes with the file')
    assert.isFalse(await service.isRunning(agent.id), 'knowledge did not wake it')
  }).timeout(60_000)
})

test.group('Knowledge: retrieval into the model request', (group) => {
  const owners = agentOwners({ credits: 100_000 })
  let upstream: ModelUpstream
  let restore: () => void
  let restoreProviders: () => void
  group.setup(async () => {
    upstream = await startModelUpstream()
    restore = useUpstream(upstream)
    restoreProviders = useProviderEndpoints(upstream)
    return async () => {
      restore()
      restoreProviders()
      await upstream.close()
      await owners.removeAgents()
    }
  })

  test('the passage with the answer reaches the model; an unrelated document does not', async ({
    client,
    assert,
  }) => {
    const { user, agent, jwt } = await owner()
    await uploadFactAndUnrelated(client, agent.id, jwt)

    upstream.reset()
    const chat = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(await apiKeyFor(user))
      .json({ message: 'What is the launch code of Project Zephyr?' })
    chat.assertStatus(200)
    assertFactOnly(assert, upstream.requests[0].body.messages[0])
  })

  test('on the customer-key path the passage is in the system message sent to the provider', async ({
    client,
    assert,
  }) => {
    const user = await createUser({ credits: 100_000 })
    const agent = await createAgentFor(user, {
      config: {
        personality: 'You are a ship computer.',
        provider: 'openai',
        apiKey: 'sk-customer-own-key',
      },
    })
    await uploadFactAndUnrelated(client, agent.id, jwtFor(user))

    upstream.reset()
    const chat = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(await apiKeyFor(user))
      .json({ message: 'What is the launch code of Project Zephyr?' })
    chat.assertStatus(200)
    const [request] = upstream.requests
    assert.equal(
      request.headers.authorization,
      'Bearer sk-customer-own-key',
      'sent with the customer key'
    )
    assertFactOnly(assert, request.body.messages[0])
  })

  test('knowledge added or deleted between chats is in, then out of, the next prompt', async ({
    client,
    assert,
  }) => {
    // The chat routes skip the knowledge search when the flag read with the agent row says there
    // is none: each answer must follow the files as they are now, on both routes.
    const { user, agent, jwt } = await owner()
    const key = await apiKeyFor(user)
    const question = 'What is the launch code of Project Zephyr?'
    const systemPrompts = async () => {
      upstream.reset()
      const chat = await client
        .post(`/api/v1/agents/${agent.id}/chat`)
        .bearerToken(key)
        .json({ message: question })
      chat.assertStatus(200)
      const stream = await client
        .post(`/agents/${agent.id}/chat/stream`)
        .bearerToken(jwt)
        .json({ message: question })
      stream.assertStatus(200)
      assert.lengthOf(upstream.requests, 2)
      return upstream.requests.map((request) => request.body.messages[0].content as string)
    }

    for (const prompt of await systemPrompts()) assert.notInclude(prompt, '7-4-1-9')
    const uploaded = await client
      .post(`/agents/${agent.id}/knowledge`)
      .bearerToken(jwt)
      .json({ filename: 'zephyr.txt', content: FACT })
    uploaded.assertStatus(201)
    for (const prompt of await systemPrompts()) assert.include(prompt, '7-4-1-9')
    const deleted = await client.delete(`/agents/${agent.id}/knowledge/zephyr.txt`).bearerToken(jwt)
    deleted.assertStatus(200)
    for (const prompt of await systemPrompts()) assert.notInclude(prompt, '7-4-1-9')
  })

  test('on the container path the passage travels with the message to the framework', async ({
    client,
    assert,
  }) => {
    const user = await owners.create()
    const { agent, jwt } = await servingFixtureAgent(client, user)
    const upload = (filename: string, content: string) =>
      client.post(`/agents/${agent.id}/knowledge`).bearerToken(jwt).json({ filename, content })
    for (const [filename, content] of [
      ['zephyr.txt', `Mission log.\n\n${FACT}`],
      ['recipes.txt', UNRELATED],
    ]) {
      const uploaded = await upload(filename, content)
      uploaded.assertStatus(201)
    }

    const chat = await client
      .post(`/api/v1/agents/${agent.id}/chat`)
      .bearerToken(await apiKeyFor(user))
      .json({ message: '__context__ What is the launch code of Project Zephyr?' })
    chat.assertStatus(200)
    // The fixture framework answers with the system messages it was given.
    const received: string[] = JSON.parse(chat.body().data.content)
    assert.lengthOf(received, 1)
    assert.include(received[0], '7-4-1-9')
    assert.notInclude(received[0], 'Pancakes')
  })
})
