import { test } from '@japa/runner'
import { baseUrl } from '#tests/helpers/http'

test.group('GET /: where to go next', () => {
  test('API clients get the links as JSON; browsers get a page with them', async ({ assert }) => {
    for (const accept of [undefined, 'application/json', '*/*']) {
      const answer = await fetch(`${baseUrl()}/`, { headers: accept ? { accept } : {} })
      assert.equal(answer.status, 200, accept)
      assert.match(answer.headers.get('content-type')!, /application\/json/, accept)
      const body: any = await answer.json()
      assert.isTrue(body.success)
      assert.deepInclude(body.data, { docs: '/docs', console: '/console', health: '/health' })
    }
    const page = await fetch(`${baseUrl()}/`, {
      headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' },
    })
    assert.equal(page.status, 200)
    assert.match(page.headers.get('content-type')!, /text\/html/)
    const html = await page.text()
    for (const href of ['/docs', '/console', '/health']) assert.include(html, `href="${href}"`)
  })
})
