import { test } from '@japa/runner'
import { afterReply } from '#core/http/after_reply'

/** A promise and the functions that settle it. */
function deferred() {
  let resolve!: () => void
  let reject!: (error: Error) => void
  const promise = new Promise<void>((yes, no) => {
    resolve = yes
    reject = no
  })
  return { promise, resolve, reject }
}

/**
 * Writes that finish after an answer (after_reply.ts): a reader of one of
 * their keys waits for them, a reader of another key does not, a failure
 * reaches the error handler and never a reader, and the shutdown's drain
 * waits for everything.
 */
test.group('After the reply', () => {
  test('a key waits for its writes until they end; other keys and ended writes cost no wait', async ({
    assert,
  }) => {
    assert.isUndefined(afterReply.pending('account:quiet'))
    const write = deferred()
    afterReply.track(['account:a', 'agent:x'], write.promise, () => {})
    assert.isUndefined(afterReply.pending('account:b'))
    const waiting = afterReply.pending('agent:x')!
    let waited = false
    void waiting.then(() => (waited = true))
    await new Promise((resolve) => setImmediate(resolve))
    assert.isFalse(waited, 'still waiting while the write runs')
    write.resolve()
    await waiting
    assert.isTrue(waited)
    assert.isUndefined(afterReply.pending('account:a'), 'forgotten once it ended')
    assert.isUndefined(afterReply.pending('agent:x'))
  })

  test('a failed write goes to its handler; its readers go on', async ({ assert }) => {
    const write = deferred()
    const errors: unknown[] = []
    afterReply.track(['account:c'], write.promise, (error) => errors.push(error))
    const waiting = afterReply.pending('account:c')!
    write.reject(new Error('database gone'))
    await waiting
    assert.deepEqual(
      errors.map((error) => (error as Error).message),
      ['database gone']
    )
    assert.isUndefined(afterReply.pending('account:c'))
  })

  test('the drain waits for every write, also those tracked while it waits', async ({ assert }) => {
    const first = deferred()
    const second = deferred()
    afterReply.track(['account:d'], first.promise, () => {})
    let drained = false
    const drain = afterReply.drain().then(() => (drained = true))
    afterReply.track(['agent:y'], second.promise, () => {})
    first.resolve()
    await new Promise((resolve) => setTimeout(resolve, 10))
    assert.isFalse(drained, 'the second write still runs')
    second.resolve()
    await drain
    assert.isTrue(drained)
  })
})
