import { test } from '@japa/runner'
import { LOCAL_DEV_MODEL, modelProxyConfig } from '#config/model_proxy'
import { creditsFor, isFreeModel, rateFor } from '#chat/services/metering'

const usage = { inputTokens: 1000, outputTokens: 1000 }

test.group('Metering: rates', (group) => {
  const upstream = { ...modelProxyConfig.upstream }
  group.each.teardown(() => {
    Object.assign(modelProxyConfig.upstream, upstream)
    delete modelProxyConfig.rates['zero-rated']
  })

  test('a model missing from the rate table pays the default rate', ({ assert }) => {
    assert.deepEqual(rateFor('some-new-model-2027'), modelProxyConfig.defaultRate)
    assert.isAbove(creditsFor('some-new-model-2027', usage), 0)
    assert.isFalse(isFreeModel('some-new-model-2027'))
  })

  test('vendor prefixes and dated names find their table rate', ({ assert }) => {
    assert.deepEqual(
      rateFor('openai/gpt-4o-mini-2024-07-18'),
      modelProxyConfig.rates['gpt-4o-mini']
    )
  })

  test('only the built-in local-dev model is free', ({ assert }) => {
    modelProxyConfig.upstream.url = null
    assert.isTrue(isFreeModel(LOCAL_DEV_MODEL))
    assert.equal(creditsFor(LOCAL_DEV_MODEL, usage), 0)
    for (const lookalike of ['local-dev-2', 'vendor/local-dev', 'LOCAL-DEV']) {
      assert.isFalse(isFreeModel(lookalike), lookalike)
      assert.isAbove(creditsFor(lookalike, usage), 0, lookalike)
    }
    // With a real upstream, a request naming local-dev reaches it and is paid.
    modelProxyConfig.upstream.url = 'http://127.0.0.1:9/v1'
    assert.isFalse(isFreeModel(LOCAL_DEV_MODEL))
    assert.isAbove(creditsFor(LOCAL_DEV_MODEL, usage), 0)
  })

  test('a zero rate in the table does not make a model free', ({ assert }) => {
    modelProxyConfig.rates['zero-rated'] = { input: 0, output: 0 }
    assert.isAbove(creditsFor('zero-rated', usage), 0)
  })
})
