import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { apiKeyFor, creditsOf, jwtFor } from '#tests/helpers/identity'
import Agent from '#agents/models/agent'
import { agentOwners, foldersOf, putToSleep, waitUntilServing } from '#tests/helpers/agents_http'
import { startModelUpstream, useUpstream, type ModelUpstream } from '#tests/helpers/model_upstream'

const owners = agentOwners()

/**
 * A hermes agent made through the API, served by the real Hermes gateway
 * (installed into the runtime cache on first use): its replies come from
 * the service's own model proxy, which meters them in credits; its memory
 * survives a restart and a sleep, and a message to it asleep is answered
 * on the hosted path while it wakes.
 */
test.group('Agents: a real Hermes agent through the API', (group) => {
  let upstream: ModelUpstream
  let restore: () => void
  group.setup(async () => {
    upstream = await startModelUpstream({
      reply: 'Wren answers through the proxy.',
      usage: { prompt_tokens: 40, completion_tokens: 5 },
    })
    // 1 credit per input token and 2 per output token: 50 credits per model call.
    restore = useUpstream(upstream, {
      defaultModel: 'hermes-test-model',
      rates: { 'hermes-test-model': { input: 1_000_000, output: 2_000_000 } },
    })
    return async () => {
      await owners.removeAgents()
      restore()
      await upstream.close()
    }
  })

  test('create -> ready -> chat through the model proxy -> credits charged -> memory kept across a restart -> sleep -> a message wakes it', async ({
    client,
    assert,
  }) => {
    const owner = await owners.create({ tier: 'pro', credits: 5_000_000 })
    const jwt = jwtFor(owner)
    const created = await client
      .post('/agents')
      .bearerToken(jwt)
      .json({
        name: 'Wren',
        framework: 'hermes',
        config: { personality: 'You are Wren, a quiet archivist.' },
      })
    created.assertStatus(201)
    const agentId: string = created.body().data.id
    await waitUntilServing(agentId, 180_000)
    const before = await creditsOf(owner)

    const chat = await client
      .post(`/api/v1/agents/${agentId}/chat`)
      .bearerToken(await apiKeyFor(owner))
      .json({ message: 'Hello Wren' })
    chat.assertStatus(200)
    assert.equal(
      chat.body().data.content,
      'Wren answers through the proxy.',
      JSON.stringify(chat.body())
    )
    assert.notEqual(chat.body().data.model, 'local-dev', 'answered by the container')

    const modelCalls = upstream.requests.filter((r) => r.path === '/v1/chat/completions')
    assert.isAbove(modelCalls.length, 0, 'Hermes reached the model through the service')
    for (const call of modelCalls) {
      assert.equal(call.body.model, 'hermes-test-model')
      assert.equal(call.headers.authorization, 'Bearer upstream-secret-key', "the service's key")
    }
    const system = modelCalls[0].body.messages.find((m: any) => m.role === 'system')
    assert.include(system.content, 'You are Wren, a quiet archivist.')

    const charged = await db
      .from('credit_ledger')
      .where({ user_id: owner.id, kind: 'llm' })
      .whereRaw(`metadata->>'agentId' = ?`, [agentId])
    assert.lengthOf(charged, modelCalls.length, 'each model call metered once')
    for (const entry of charged) assert.equal(entry.credits, -50)
    assert.equal(await creditsOf(owner), before - 50 * modelCalls.length)

    // What Hermes' memory tool keeps (HERMES_HOME/memories), through a restart.
    await writeFile(
      join(foldersOf(agentId).state, 'memories', 'MEMORY.md'),
      'The archive opens at nine.\n'
    )
    const restarted = await client.post(`/agents/${agentId}/restart`).bearerToken(jwt)
    restarted.assertStatus(200)
    await waitUntilServing(agentId, 120_000)
    const memory = await client.get(`/agents/${agentId}/memory`).bearerToken(jwt)
    memory.assertStatus(200)
    assert.equal(memory.body().data.memory['memories/MEMORY.md'], 'The archive opens at nine.\n')

    // Asleep (scale to zero): a message is answered at once on the hosted path and wakes the
    // real gateway, which answers the next one with its memory still there. Hermes' own model
    // calls carry its tools; the hosted path's carry none.
    const service = await putToSleep(agentId)
    assert.isFalse(await service.isRunning(agentId), 'its gateway stopped')
    const key = await apiKeyFor(owner)
    const seen = upstream.requests.length
    const asleep = await client
      .post(`/api/v1/agents/${agentId}/chat`)
      .bearerToken(key)
      .json({ message: 'Are you awake?' })
    asleep.assertStatus(200)
    assert.equal(asleep.body().data.content, 'Wren answers through the proxy.')
    assert.equal(asleep.body().data.model, 'hermes-test-model', 'the hosted model answered')
    const hostedCall = upstream.requests
      .slice(seen)
      .find((r) => r.path === '/v1/chat/completions' && !r.body.tools)
    assert.exists(hostedCall, 'answered on the hosted path while it wakes')

    await waitUntilServing(agentId, 180_000)
    const stored = await Agent.findOrFail(agentId)
    assert.isNull(stored.sleepingSince, 'no longer asleep')
    const woken = await client.get(`/agents/${agentId}/memory`).bearerToken(jwt)
    assert.equal(woken.body().data.memory['memories/MEMORY.md'], 'The archive opens at nine.\n')
    const awake = upstream.requests.length
    // A new conversation (no history): Hermes keys its session on the first user message and
    // keeps a session's system prompt, memory snapshot included, as it was at its first turn.
    const fromGateway = await client
      .post(`/api/v1/agents/${agentId}/chat`)
      .bearerToken(key)
      .json({ message: 'When does the archive open?', history: [] })
    fromGateway.assertStatus(200)
    const gatewayCalls = upstream.requests
      .slice(awake)
      .filter((r) => r.path === '/v1/chat/completions')
    assert.isNotEmpty(gatewayCalls)
    assert.isTrue(
      gatewayCalls.some((call) => Array.isArray(call.body.tools)),
      'answered by the woken Hermes gateway (its calls carry its tools)'
    )
    const withTools = gatewayCalls.find((call) => Array.isArray(call.body.tools))!
    assert.include(JSON.stringify(withTools.body.messages), 'The archive opens at nine.')
  }).timeout(600_000)
})
