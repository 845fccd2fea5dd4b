import { test } from '@japa/runner'
import { createAgentFor } from '#tests/helpers/agents_fixture'
import { agentOwners } from '#tests/helpers/agents_http'
import { apiKeyFor, jwtFor } from '#tests/helpers/identity'
import { baseUrl } from '#tests/helpers/http'

/**
 * Page sizes (docs/hardening.md "Limits"): every list operation in
 * /openapi.json that takes a page size or position is walked with
 * over-large values; each answers 400 VALIDATION_ERROR or a capped page,
 * never a 5xx or an unbounded list.
 */
const PAGING = new Set(['limit', 'page', 'offset', 'tail', 'perPage', 'pageSize', 'size'])
/** Largest page any list answers (spec: `limit` 1 to 100). */
const PAGE_MAX = 100
const owners = agentOwners({ tier: 'pro' })

test.group('Page sizes on every list', (group) => {
  group.teardown(() => owners.removeAgents())

  test('every list parameter in /openapi.json refuses or caps an over-large value', async ({
    assert,
  }) => {
    const document = await fetch(`${baseUrl()}/openapi.json`)
    const doc = (await document.json()) as any
    const lists: Array<{ path: string; name: string }> = []
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const parameter of item.get?.parameters ?? []) {
        if (parameter.in === 'query' && PAGING.has(parameter.name)) {
          lists.push({ path, name: parameter.name })
        }
      }
    }
    const found = lists.map(({ path, name }) => `${path} ${name}`)
    // The spec's lists: a document that lost them would make this walk vacuous.
    for (const expected of [
      '/agents page',
      '/agents limit',
      '/agents/{id}/versions limit',
      '/agents/{id}/versions offset',
      '/ai-credits/history limit',
      '/agents/{id}/logs tail',
    ]) {
      assert.include(found, expected)
    }

    const user = await owners.create()
    const agent = await createAgentFor(user)
    const jwt = jwtFor(user)
    const key = await apiKeyFor(user)
    for (const { path, name } of lists) {
      const concrete = path.replace('{id}', agent.id)
      assert.notMatch(concrete, /\{/, `${path}: a path parameter this walk cannot fill`)
      for (const value of ['1000000000', '99999999999999999999', '-1', '1e400']) {
        const response = await fetch(`${baseUrl()}${concrete}?${name}=${value}`, {
          headers: { authorization: `Bearer ${concrete.startsWith('/api/v1') ? key : jwt}` },
        })
        const what = `${concrete}?${name}=${value}`
        assert.include([200, 400], response.status, what)
        const body = (await response.json()) as any
        if (response.status === 400) {
          assert.equal(body.code, 'VALIDATION_ERROR', what)
          continue
        }
        if (name === 'limit') assert.isAtMost(body.data.limit ?? 0, PAGE_MAX, what)
        for (const list of Object.values<any>(body.data ?? {})) {
          if (Array.isArray(list)) assert.isAtMost(list.length, PAGE_MAX, what)
        }
      }
    }
    // A valid far page is an empty page, not an error.
    const far = await fetch(`${baseUrl()}/agents?page=1000000&limit=100`, {
      headers: { authorization: `Bearer ${jwt}` },
    })
    assert.equal(far.status, 200)
    const farBody = (await far.json()) as any
    assert.deepEqual(farBody.data.agents, [])
    assert.equal(farBody.data.limit, 100)
  }).timeout(60_000)
})
