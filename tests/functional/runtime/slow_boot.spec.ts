import { randomUUID } from 'node:crypto'
import { test } from '@japa/runner'
import { fixtureSpec, processHarness, waitFor, type RuntimeHarness } from '#tests/helpers/runtime'

test.group('Runtime: a boot slower than the readiness timeout', (group) => {
  let harness: RuntimeHarness
  group.each.setup(async () => {
    harness = await processHarness({}, { readinessTimeoutMs: 1000 })
    return () => harness.cleanup()
  })

  test('is still watched after the timeout, and shows running once it answers', async ({
    assert,
  }) => {
    const agentId = randomUUID()
    // Ready after 4 s: past the 1 s readiness timeout (a loaded host, a slow framework).
    await assert.rejects(() =>
      harness.runtime.ensureStarted(fixtureSpec(agentId, { readyDelayMs: 4000 }), {
        waitReady: true,
      })
    )
    assert.equal(await harness.runtime.containerView(agentId), 'starting')
    await waitFor(
      'the slow agent to show running',
      async () => (await harness.runtime.containerView(agentId)) === 'running',
      30_000
    )
  }).timeout(60_000)
})
