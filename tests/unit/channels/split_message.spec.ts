import { test } from '@japa/runner'
import { splitMessage } from '#channels/services/split_message'
import { backoffMs } from '#channels/services/channel_supervisor'

test.group('Channels: splitting replies', () => {
  test('a short reply is one part; a long one is cut at paragraphs, then sentences, within the limit', ({
    assert,
  }) => {
    assert.deepEqual(splitMessage('  Hello there.  ', 50), ['Hello there.'])
    const paragraph = 'First sentence here. Second sentence here.'
    const text = `${paragraph}\n\n${paragraph}\n\n${paragraph}`
    const parts = splitMessage(text, 60)
    assert.isAbove(parts.length, 1)
    for (const part of parts) assert.isAtMost(part.length, 60)
    assert.equal(parts.join(' ').replace(/\s+/g, ' '), text.replace(/\s+/g, ' '), 'nothing lost')
    assert.isTrue(
      parts.every((part) => /[.]$/.test(part)),
      'each part ends a sentence'
    )
  })

  test('text without any break is cut hard at the limit; nothing is empty', ({ assert }) => {
    const parts = splitMessage('x'.repeat(250), 100)
    assert.deepEqual(
      parts.map((part) => part.length),
      [100, 100, 50]
    )
    assert.deepEqual(splitMessage('   ', 10), ['…'])
  })

  test('reconnect backoff grows with failures, is capped, and is jittered', ({ assert }) => {
    const first = Array.from({ length: 50 }, () => backoffMs(0))
    assert.isTrue(first.every((ms) => ms >= 1000 && ms <= 3000))
    assert.isAbove(new Set(first).size, 1, 'jittered')
    const late = Array.from({ length: 50 }, () => backoffMs(40))
    assert.isTrue(
      late.every((ms) => ms >= 150_000 && ms <= 450_000),
      'capped at 5 min ± 50 %'
    )
  })
})
