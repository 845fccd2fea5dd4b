import { test } from '@japa/runner'
import { modelProxyConfig } from '#config/model_proxy'
import { proxyTokenOf } from '#agents/services/agent_tokens'
import Agent from '#agents/models/agent'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { createUser, creditsOf, jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'
import { proxyCompletions, upstreamForGroup } from '#tests/helpers/model_upstream'

/** 1 credit per input token, 2 per output token. */
const METERED = { 'metered-model': { input: 1_000_000, output: 2_000_000 } }

function models(token: string) {
  return fetch(`${baseUrl()}/v1/models`, { headers: { authorization: `Bearer ${token}` } })
}

const completions = (token: string, body: Record<string, unknown>) =>
  proxyCompletions(token, { model: 'metered-model', ...body })

/**
 * Metering bypasses through the model proxy (issue 17): whatever reaches
 * the provider is covered by the credits held for it.
 */
test.group('Model proxy: no request costs more than its hold', (group) => {
  const upstream = upstreamForGroup(group, { rates: METERED })

  test('a small max_completion_tokens cannot hide a large max_tokens; the provider gets the held limit', async ({
    assert,
  }) => {
    const owner = await createUser({ credits: 100_000 })
    const token = proxyTokenOf(await createAgentFor(owner))
    const answer = await completions(token, {
      messages: [{ role: 'user', content: 'hi' }],
      max_completion_tokens: 1,
      max_tokens: 200_000,
    })
    // 200,000 output tokens at 2 credits each cannot be held from 100,000 credits: the request
    // goes out with the largest limit the balance holds (about 50,000), never with the 1.
    assert.equal(answer.status, 200)
    const fitted = upstream.requests[0].body
    assert.isAbove(fitted.max_completion_tokens, 40_000)
    assert.isAtMost(fitted.max_completion_tokens, 50_000)
    assert.notProperty(fitted, 'max_tokens')
    upstream.reset()

    const small = await completions(token, {
      messages: [{ role: 'user', content: 'hi' }],
      max_completion_tokens: 50,
      max_tokens: 10,
    })
    assert.equal(small.status, 200)
    const sent = upstream.requests[0].body
    assert.equal(sent.max_completion_tokens, 50, 'the larger limit, which the hold covered')
    assert.notProperty(sent, 'max_tokens')
  })

  test('n above 1 is refused before the provider is called; unknown fields are not forwarded', async ({
    assert,
  }) => {
    const owner = await createUser({ credits: 10_000 })
    const token = proxyTokenOf(await createAgentFor(owner))
    const many = await completions(token, { messages: [{ role: 'user', content: 'hi' }], n: 8 })
    assert.equal(many.status, 400)
    assert.equal(((await many.json()) as any).code, 'VALIDATION_ERROR')
    assert.lengthOf(upstream.requests, 0)
    assert.equal(await creditsOf(owner), 10_000, 'the hold came back')

    const extras = await completions(token, {
      messages: [{ role: 'user', content: 'hi' }],
      best_of: 20,
      temperature: 0.2,
    })
    assert.equal(extras.status, 200)
    const sent = upstream.requests[0].body
    assert.notProperty(sent, 'best_of')
    assert.equal(sent.temperature, 0.2)
    assert.equal(
      sent.max_tokens,
      modelProxyConfig.reserveOutputTokens,
      'the default reserve is sent as the limit'
    )
  })

  test('with MODEL_ALLOWLIST set, other model names are refused', async ({ assert }) => {
    const owner = await createUser({ credits: 10_000 })
    const token = proxyTokenOf(await createAgentFor(owner))
    const previous = modelProxyConfig.modelAllowlist
    modelProxyConfig.modelAllowlist = ['metered-model']
    try {
      const other = await completions(token, {
        model: 'gpt-4o',
        messages: [{ role: 'user', content: 'hi' }],
      })
      assert.equal(other.status, 400)
      assert.lengthOf(upstream.requests, 0)
      const allowed = await completions(token, { messages: [{ role: 'user', content: 'hi' }] })
      assert.equal(allowed.status, 200)
    } finally {
      modelProxyConfig.modelAllowlist = previous
    }
  })

  test('without MODEL_ALLOWLIST only MODEL_NAME and the rate table reach the provider; other names are 400 naming model', async ({
    assert,
  }) => {
    const previous = modelProxyConfig.modelAllowlist
    modelProxyConfig.modelAllowlist = null // MODEL_ALLOWLIST unset: the default
    try {
      const owner = await createUser({ credits: 10_000 })
      const token = proxyTokenOf(await createAgentFor(owner))
      const messages = [{ role: 'user', content: 'hi' }]
      // Unpriced names would be charged the default rate; a longer name that merely starts
      // like a priced one (gpt-5-pro is not gpt-5) would be charged the cheaper rate.
      for (const model of ['unpriced-model', 'gpt-5-pro', 'vendor/unpriced-model']) {
        for (const stream of [false, true]) {
          const refused = await completions(token, { model, messages, stream })
          assert.equal(refused.status, 400, `${model} (stream: ${stream})`)
          const body: any = await refused.json()
          assert.equal(body.code, 'VALIDATION_ERROR')
          assert.match(body.error, /^model: /)
          assert.include(body.error, 'metered-model', 'the answer names what is offered')
        }
      }
      assert.lengthOf(upstream.requests, 0, 'nothing reached the provider')
      assert.equal(await creditsOf(owner), 10_000, 'nothing was held or charged')

      // MODEL_NAME (named or by default) and the rate table's models, with a vendor
      // prefix or as a dated snapshot, are forwarded.
      const offered = [
        'metered-model',
        'stand-in-model',
        undefined,
        'openai/gpt-4o-mini',
        'gpt-4o-mini-2024-07-18',
      ]
      for (const model of offered) {
        const answer = await completions(token, { model, messages })
        assert.equal(answer.status, 200, String(model))
      }
      assert.deepEqual(
        upstream.requests.map((request) => request.body.model),
        [
          'metered-model',
          'stand-in-model',
          'stand-in-model',
          'openai/gpt-4o-mini',
          'gpt-4o-mini-2024-07-18',
        ]
      )

      // The model list shows only what a request may name.
      upstream.set({ model: 'unpriced-model' })
      const listing = await models(token)
      const listed: any = await listing.json()
      assert.deepEqual(
        listed.data.map((entry: any) => entry.id),
        ['stand-in-model', 'local-dev']
      )
    } finally {
      modelProxyConfig.modelAllowlist = previous
    }
  })

  test('MODEL_ALLOWLIST=* forwards any name (charged at the default rate)', async ({ assert }) => {
    const previous = modelProxyConfig.modelAllowlist
    modelProxyConfig.modelAllowlist = ['*']
    try {
      const owner = await createUser({ credits: 100_000 })
      const token = proxyTokenOf(await createAgentFor(owner))
      const answer = await completions(token, {
        model: 'unpriced-model',
        messages: [{ role: 'user', content: 'hi' }],
      })
      assert.equal(answer.status, 200)
      assert.equal(upstream.requests[0].body.model, 'unpriced-model')
    } finally {
      modelProxyConfig.modelAllowlist = previous
    }
  })

  test('the proxy token of a stopped agent is refused', async ({ assert }) => {
    const owner = await createUser({ credits: 10_000 })
    const agent = await createAgentFor(owner)
    await Agent.query().where('id', agent.id).update({ status: 'stopped' })
    const answer = await completions(proxyTokenOf(agent), {
      messages: [{ role: 'user', content: 'hi' }],
    })
    assert.equal(answer.status, 409)
    assert.equal(((await answer.json()) as any).code, 'AGENT_NOT_RUNNING')
    assert.lengthOf(upstream.requests, 0)
  })

  test('the proxy token of a deleted agent is refused with 401', async ({ assert, client }) => {
    const owner = await createUser({ credits: 10_000 })
    const agent = await createAgentFor(owner)
    const token = proxyTokenOf(agent)
    const before = await completions(token, { messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(before.status, 200)
    upstream.reset()

    const deleted = await client.delete(`/agents/${agent.id}`).bearerToken(jwtFor(owner))
    assert.isBelow(deleted.status(), 300)
    const after = await completions(token, { messages: [{ role: 'user', content: 'hi' }] })
    assert.equal(after.status, 401)
    assert.equal(((await after.json()) as any).code, 'AUTH_REQUIRED')
    const listing = await models(token)
    assert.equal(listing.status, 401)
    assert.lengthOf(upstream.requests, 0)
  })
})
