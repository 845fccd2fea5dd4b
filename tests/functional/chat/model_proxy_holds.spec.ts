import { test } from '@japa/runner'
import db from '@adonisjs/lucid/services/db'
import { proxyTokenOf } from '#agents/services/agent_tokens'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { createUser, creditsOf } from '#tests/helpers/identity'
import { proxyCompletions, readSse, upstreamForGroup } from '#tests/helpers/model_upstream'

/** 1 credit per input token, 2 per output token. */
const METERED = { 'metered-model': { input: 1_000_000, output: 2_000_000 } }

const completions = (token: string, body: Record<string, unknown>) =>
  proxyCompletions(token, { model: 'metered-model', ...body })

async function agentOwnerWith(credits: number) {
  const owner = await createUser({ credits })
  return { owner, token: proxyTokenOf(await createAgentFor(owner)) }
}

async function llmEntries(userId: string) {
  return db.from('credit_ledger').where({ user_id: userId, kind: 'llm' }).orderBy('seq', 'asc')
}

/** A tool whose description alone is 900 KB (issue 25: 225,055 prompt tokens upstream). */
const HUGE_TOOL = {
  type: 'function',
  function: {
    name: 'lookup',
    description: 'x '.repeat(450 * 1024),
    parameters: { type: 'object', properties: {} },
  },
}

/**
 * The model proxy's credit hold covers the whole request it forwards
 * (issue 25 item 4; CONTRACT "Tenant boundary"): tools, functions and
 * response_format schemas count like messages, a request whose worst case
 * exceeds the balance is 402 before the provider sees it, and the
 * settlement never takes more than the hold.
 */
test.group('Model proxy: the hold covers every prompt-bearing field', (group) => {
  const upstream = upstreamForGroup(group, { rates: METERED })

  test('a 900 KB tool with a small balance is 402 INSUFFICIENT_CREDITS, streamed or not; the provider never sees it', async ({
    assert,
  }) => {
    const { owner, token } = await agentOwnerWith(5000)
    const messages = [{ role: 'user', content: 'use the tool' }]
    for (const stream of [false, true]) {
      const response = await completions(token, {
        max_tokens: 300,
        messages,
        tools: [HUGE_TOOL],
        stream,
      })
      assert.equal(response.status, 402, `stream: ${stream}`)
      assert.deepInclude(await response.json(), { code: 'INSUFFICIENT_CREDITS' })
    }
    // The other prompt-bearing fields count too.
    const schema = {
      type: 'json_schema',
      json_schema: { name: 'answer', schema: { description: HUGE_TOOL.function.description } },
    }
    const viaSchema = await completions(token, { messages, response_format: schema })
    assert.equal(viaSchema.status, 402)
    await viaSchema.arrayBuffer()
    const viaFunctions = await completions(token, {
      messages,
      functions: [HUGE_TOOL.function],
    })
    assert.equal(viaFunctions.status, 402)
    await viaFunctions.arrayBuffer()

    assert.lengthOf(upstream.requests, 0, 'nothing reached the provider')
    assert.equal(await creditsOf(owner), 5000)
    assert.lengthOf(await llmEntries(owner.id), 0)
    assert.lengthOf(await db.from('chat_credit_holds').where('user_id', owner.id), 0)
  })

  test('with a balance that covers it, the same request goes out exactly as priced and costs what was used', async ({
    assert,
  }) => {
    const { owner, token } = await agentOwnerWith(2_000_000)
    upstream.set({ reply: 'done', usage: { prompt_tokens: 225_055, completion_tokens: 1 } })
    const response = await completions(token, {
      max_tokens: 300,
      messages: [{ role: 'user', content: 'use the tool' }],
      tools: [HUGE_TOOL],
    })
    assert.equal(response.status, 200)
    await response.arrayBuffer()
    const forwarded = upstream.requests[0].body
    assert.equal(forwarded.tools[0].function.description, HUGE_TOOL.function.description)
    assert.equal(forwarded.max_tokens, 300)
    const [entry] = await llmEntries(owner.id)
    assert.equal(entry.credits, -(225_055 + 2))
    assert.notProperty(entry.metadata, 'uncoveredCredits')
    assert.equal(await creditsOf(owner), 2_000_000 - 225_057)
  })

  for (const stream of [false, true]) {
    test(`a normal request with tools works and is never charged more than its hold (stream: ${stream})`, async ({
      assert,
    }) => {
      const { owner, token } = await agentOwnerWith(10_000)
      const tool = {
        type: 'function',
        function: { name: 'clock', description: 'Tells the time', parameters: { type: 'object' } },
      }
      // First an ordinary answer: charged the reported usage.
      upstream.set({ reply: 'It is noon', usage: { prompt_tokens: 40, completion_tokens: 3 } })
      const ordinary = await completions(token, {
        max_tokens: 100,
        messages: [{ role: 'user', content: 'What time is it?' }],
        tools: [tool],
        stream,
      })
      assert.equal(ordinary.status, 200)
      if (stream) {
        const { events } = await readSse(ordinary)
        assert.equal(events.at(-1), '[DONE]')
      } else {
        const json: any = await ordinary.json()
        assert.equal(json.choices[0].message.content, 'It is noon')
      }
      assert.deepEqual(upstream.requests[0].body.tools, [tool])
      assert.equal(await creditsOf(owner), 10_000 - 46)

      // Then a provider that reports far more than the request could cost: the hold is the cap.
      upstream.reset()
      upstream.set({ reply: 'It is noon', usage: { prompt_tokens: 900_000, completion_tokens: 3 } })
      const overReported = await completions(token, {
        max_tokens: 100,
        messages: [{ role: 'user', content: 'What time is it?' }],
        tools: [tool],
        stream,
      })
      assert.equal(overReported.status, 200)
      await overReported.arrayBuffer()
      const entries = await llmEntries(owner.id)
      assert.lengthOf(entries, 2)
      const charged = -entries[1].credits
      // The hold covered the whole forwarded body (tools included) and the output limit...
      const forwardedBytes = Buffer.byteLength(JSON.stringify(upstream.requests[0].body))
      assert.isAtLeast(charged, forwardedBytes + 2 * 100)
      // ...and nothing beyond it was taken.
      assert.isBelow(charged, 2 * forwardedBytes + 2 * 100)
      assert.equal(entries[1].metadata.uncoveredCredits, 900_006 - charged)
      assert.equal(await creditsOf(owner), 10_000 - 46 - charged)
      assert.lengthOf(await db.from('chat_credit_holds').where('user_id', owner.id), 0)
    })
  }
})
